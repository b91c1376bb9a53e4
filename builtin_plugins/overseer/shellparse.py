"""A small parser for the shell commands coding agents run, built for inspection, not execution.

It turns a command line (bash syntax, as documented in the Bash Reference Manual, 5.2:
"Shell Syntax", "Shell Commands", "Shell Expansions", "Redirections") into a tree the
destructive-action rules can walk:

- :class:`Script` — pipelines separated by ``;``, ``&``, ``&&``, ``||`` or newlines;
- :class:`Pipeline` — commands joined by ``|`` / ``|&``;
- :class:`Simple` — assignments, words and redirections of one simple command;
- :class:`Compound` — a subshell ``( … )``, a group ``{ …; }`` or a ``case`` body;
- :class:`FuncDef` — ``name() { … }`` / ``function name { … }``.

Words keep their structure as :data:`Segment` parts: literal text (with whether it was quoted),
``$VAR`` / ``${…}`` expansions, ``~`` prefixes, ``$(…)`` / backtick / ``<(…)`` substitutions
(parsed recursively into a :class:`Script`) and ``$((…))`` arithmetic. Nothing is expanded or
run. Reserved words (``if then else elif fi do done while until ! time``) are treated as
prefixes so the commands inside ``if``/``while``/``for`` bodies surface as ordinary commands;
``[[ … ]]`` is read as one command whose operators are plain words.

Unsupported or malformed input (unbalanced quotes or parentheses, a nesting deeper than
:data:`MAX_DEPTH`) raises :class:`ParseError` — callers fail closed on it. No bashlex: it is
GPLv3+, which cannot be a dependency of Apache-2.0 Elowen, and it rejects common agent
constructs this parser accepts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

__all__ = [
    "MAX_DEPTH",
    "Arith",
    "Command",
    "Compound",
    "FuncDef",
    "Lit",
    "ParseError",
    "Pipeline",
    "Redirect",
    "Script",
    "Segment",
    "Simple",
    "Sub",
    "Tilde",
    "Var",
    "Word",
    "parse",
]

MAX_DEPTH = 40
"""Deepest nesting of substitutions, subshells and groups accepted before :class:`ParseError`."""

_META = set(" \t\n;&|()<>")
_RESERVED_PREFIX = {"!", "if", "then", "elif", "else", "do", "while", "until", "time"}
_RESERVED_END = {"fi", "done", "esac"}
_NAME_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_NAME_CHARS = _NAME_START | set("0123456789")
_SPECIAL_PARAMS = set("@*#?-$!0123456789")


class ParseError(ValueError):
    """The text is not a command line this parser can read (unbalanced quotes, too deep, …)."""


@dataclass(frozen=True, slots=True)
class Lit:
    """Literal text after quote removal; ``quoted`` tells whether globbing/tilde apply."""

    text: str
    quoted: bool


@dataclass(frozen=True, slots=True)
class Var:
    """A parameter expansion: ``name`` is ``HOME`` for ``$HOME``/``${HOME}``, or the raw inside
    of a complex ``${…}`` (``HOME:-/x``), which is never resolvable."""

    name: str
    quoted: bool


@dataclass(frozen=True, slots=True)
class Tilde:
    """A leading unquoted ``~`` (``user`` is ``""`` for the current user, or ``+``/``-``/a name)."""

    user: str


@dataclass(frozen=True, slots=True)
class Arith:
    """``$(( … ))`` — its value is never known statically."""

    raw: str


@dataclass(frozen=True, slots=True)
class Sub:
    """``$( … )``, backticks (``process=False``) or ``<( … )`` / ``>( … )`` (``process=True``)."""

    script: Script
    raw: str
    quoted: bool
    process: bool = False


Segment = Union[Lit, Var, Tilde, Arith, Sub]


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word: its parts in order and its source text (``raw``)."""

    parts: tuple[Segment, ...]
    raw: str

    def literal(self) -> str | None:
        """The word's value when it has no expansions (``None`` otherwise)."""
        out: list[str] = []
        for part in self.parts:
            if not isinstance(part, Lit):
                return None
            out.append(part.text)
        return "".join(out)

    def is_plain(self, text: str) -> bool:
        """True when the word is exactly the unquoted literal ``text`` (reserved-word check)."""
        return len(self.parts) == 1 and self.parts[0] == Lit(text, False)

    def code_text(self) -> str:
        """The word as a nested shell would read it (``bash -c WORD``): literal text after quote
        removal, expansions written back as ``${name}`` / ``$( … )``."""
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, Lit):
                out.append(part.text)
            elif isinstance(part, Var):
                out.append("${" + part.name + "}")
            elif isinstance(part, Tilde):
                out.append("~" + part.user)
            elif isinstance(part, Arith):
                out.append(part.raw)
            else:
                out.append(part.raw)
        return "".join(out)

    def subs(self) -> list[Sub]:
        """The substitutions inside this word, in order."""
        return [p for p in self.parts if isinstance(p, Sub)]


@dataclass(frozen=True, slots=True)
class Redirect:
    """``op`` is one of ``< > >> >| <> <& >& &> &>> << <<- <<<``; ``fd`` the explicit source
    descriptor if written (``2>``); ``target`` the file word, the here-string, or the heredoc
    body (a :class:`Word`; for an unquoted heredoc delimiter its expansions are parsed)."""

    op: str
    fd: int | None
    target: Word


@dataclass(slots=True)
class Simple:
    """A simple command: ``FOO=bar cmd arg … >file``. ``raw`` is its source text."""

    assigns: list[tuple[str, Word]] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    raw: str = ""


@dataclass(slots=True)
class Compound:
    """``kind`` is ``subshell`` (own environment), ``group`` or ``case`` (shared environment)."""

    kind: str
    body: Script
    redirects: list[Redirect] = field(default_factory=list)
    raw: str = ""


@dataclass(slots=True)
class FuncDef:
    """A function definition; ``body`` is the compound command it runs."""

    name: str
    body: Command
    raw: str = ""


Command = Union[Simple, Compound, FuncDef]


@dataclass(slots=True)
class Pipeline:
    """Commands whose stdout feeds the next one's stdin; ``background`` for a trailing ``&``."""

    commands: list[Command] = field(default_factory=list)
    background: bool = False


@dataclass(slots=True)
class Script:
    """A list of pipelines run in order (``;``, ``&&``, ``||``, ``&`` and newlines)."""

    pipelines: list[Pipeline] = field(default_factory=list)


def parse(text: str) -> Script:
    """Parse ``text`` (a command line or short script) into a :class:`Script`.

    Raises :class:`ParseError` on unbalanced quotes, parentheses, braces or backticks, on a
    stray ``)``/operator, and on nesting deeper than :data:`MAX_DEPTH`.
    """
    parser = _Parser(text)
    try:
        script = parser.parse_list(None)
    except RecursionError as exc:
        raise ParseError("command nests too deeply") from exc
    if parser.pending:
        # A heredoc whose body never started (no newline after the operator) has no body.
        parser.read_heredocs()
    return script


class _Parser:
    """Recursive-descent reader over one source string (see :func:`parse`)."""

    def __init__(self, src: str) -> None:
        self.s = src
        self.i = 0
        self.depth = 0
        # (redirect index holder, delimiter, quoted, strip_tabs); bodies are read at the next newline
        self.pending: list[tuple[list[Redirect], int, str, bool, bool]] = []

    # -- low level -------------------------------------------------------------------------
    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def startswith(self, text: str) -> bool:
        return self.s.startswith(text, self.i)

    def skip_blanks(self) -> None:
        """Skip spaces, tabs, line continuations and comments (not newlines)."""
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in " \t":
                self.i += 1
            elif c == "\\" and self.peek(1) == "\n":
                self.i += 2
            elif c == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
            else:
                return

    def newline(self) -> None:
        """Consume one newline and the bodies of heredocs opened on that line."""
        self.i += 1
        if self.pending:
            self.read_heredocs()

    def skip_separators(self, *, semicolons: bool) -> None:
        while True:
            self.skip_blanks()
            c = self.peek()
            if c == "\n":
                self.newline()
            elif semicolons and c == ";" and not self.startswith(";;"):
                self.i += 1
            else:
                return

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParseError("command nests too deeply")

    def leave(self) -> None:
        self.depth -= 1

    # -- lists and pipelines ---------------------------------------------------------------
    def parse_list(self, term: str | None) -> Script:
        """Read pipelines until EOF (``term=None``), ``)`` (``term=")"``), the word ``}``
        (``term="}"``), or ``;;``/``esac`` (``term="case"``). The terminator is not consumed."""
        script = Script()
        while True:
            self.skip_separators(semicolons=True)
            if self.at_terminator(term):
                return script
            if self.i >= len(self.s):
                raise ParseError(f"missing {term!r}")
            pipeline = self.parse_pipeline()
            script.pipelines.append(pipeline)
            self.skip_blanks()
            c = self.peek()
            if self.startswith("&&") or self.startswith("||"):
                self.i += 2
                self.skip_separators(semicolons=False)
                if self.at_terminator(term) or self.i >= len(self.s):
                    raise ParseError("command expected after && / ||")
            elif c == "&":
                pipeline.background = True
                self.i += 1
            elif c == ";" and not self.startswith(";;"):
                self.i += 1
            elif c == "\n":
                self.newline()
            elif self.at_terminator(term) or self.i >= len(self.s):
                continue
            else:
                raise ParseError(f"unexpected {c!r} at offset {self.i}")

    def at_terminator(self, term: str | None) -> bool:
        if self.i >= len(self.s):
            return term is None
        if term == ")":
            return self.peek() == ")"
        if term == "}":
            return self.peek() == "}" and self.word_ends_at(self.i + 1)
        if term == "case":
            return self.startswith(";;") or self.startswith(";&") or (
                self.startswith("esac") and self.word_ends_at(self.i + 4)
            )
        if term is None and self.peek() == ")":
            raise ParseError(f"unbalanced ')' at offset {self.i}")
        return False

    def word_ends_at(self, j: int) -> bool:
        return j >= len(self.s) or self.s[j] in _META

    def parse_pipeline(self) -> Pipeline:
        pipeline = Pipeline()
        while True:
            pipeline.commands.append(self.parse_command())
            self.skip_blanks()
            if self.startswith("||"):
                return pipeline
            if self.startswith("|&"):
                self.i += 2
            elif self.peek() == "|":
                self.i += 1
            else:
                return pipeline
            self.skip_separators(semicolons=False)

    # -- commands --------------------------------------------------------------------------
    def parse_command(self) -> Command:
        self.skip_blanks()
        start = self.i
        if self.startswith("(("):
            self.skip_arith_command()
            return Simple(raw=self.s[start : self.i])
        if self.peek() == "(":
            self.i += 1
            self.enter()
            body = self.parse_list(")")
            self.leave()
            self.i += 1
            cmd = Compound("subshell", body)
            self.read_trailing_redirects(cmd.redirects)
            cmd.raw = self.s[start : self.i].strip()
            return cmd
        simple = Simple()
        while True:
            self.skip_blanks()
            c = self.peek()
            if c == "" or c in "\n;|)" or self.startswith("&&") or (c == "&" and not self.startswith("&>")):
                break
            if c == "(" and len(simple.words) == 1 and simple.words[0].is_plain("for") and self.startswith("(("):
                self.skip_arith_command()
                continue
            if c == "(":
                if len(simple.words) == 1 and not simple.assigns and self.startswith_funcdef():
                    return self.parse_funcdef(simple.words[0], start)
                raise ParseError(f"unexpected '(' at offset {self.i}")
            if self.try_redirect(simple.redirects, None):
                continue
            at_start = not simple.words
            word = self.read_word()
            if self.peek() and self.peek() in "<>" and word.raw.isdigit() and self.peek(1) != "(":
                self.try_redirect(simple.redirects, int(word.raw))
                continue
            if at_start:
                if self.take_assignment(word, simple):
                    continue
                compound = self.reserved(word, start, simple)
                if compound is not None:
                    return compound
                if word.is_plain("{"):
                    return self.parse_group(start)
                if any(word.is_plain(r) for r in _RESERVED_PREFIX | _RESERVED_END) and not simple.assigns:
                    start = self.i
                    continue
                if word.is_plain("function"):
                    return self.parse_function_keyword(start)
                if word.is_plain("[["):
                    simple.words.append(word)
                    self.read_dbracket(simple)
                    continue
            simple.words.append(word)
        simple.raw = self.s[start : self.i].strip()
        return simple

    def take_assignment(self, word: Word, simple: Simple) -> bool:
        if not word.parts or not isinstance(word.parts[0], Lit) or word.parts[0].quoted:
            return False
        head = word.parts[0].text
        eq = head.find("=")
        if eq <= 0:
            return False
        name = head[:eq].removesuffix("+")
        if not name or name[0] not in _NAME_START or any(ch not in _NAME_CHARS for ch in name):
            return False
        rest = head[eq + 1 :]
        value_parts = ((Lit(rest, False),) if rest else ()) + word.parts[1:]
        if self.peek() == "(" and not value_parts:
            # name=(a b c): an array assignment; its elements are plain words.
            self.i += 1
            elems: list[Word] = []
            while True:
                self.skip_separators(semicolons=False)
                if self.peek() == ")":
                    self.i += 1
                    break
                if self.i >= len(self.s):
                    raise ParseError("unterminated array assignment")
                elems.append(self.read_word())
            simple.assigns.append((name, Word(tuple(p for e in elems for p in e.parts), word.raw)))
            return True
        simple.assigns.append((name, Word(value_parts, word.raw[eq + 1 :])))
        return True

    def reserved(self, word: Word, start: int, simple: Simple) -> Command | None:
        if simple.assigns:
            return None
        if word.is_plain("case"):
            return self.parse_case(start)
        return None

    def startswith_funcdef(self) -> bool:
        j = self.i + 1
        while j < len(self.s) and self.s[j] in " \t":
            j += 1
        return j < len(self.s) and self.s[j] == ")"

    def parse_funcdef(self, name_word: Word, start: int) -> FuncDef:
        self.i = self.s.index(")", self.i) + 1
        self.skip_separators(semicolons=False)
        body = self.parse_command()
        return FuncDef(name_word.literal() or name_word.raw, body, self.s[start : self.i].strip())

    def parse_function_keyword(self, start: int) -> FuncDef:
        self.skip_blanks()
        name = self.read_word()
        self.skip_blanks()
        if self.peek() == "(":
            if not self.startswith_funcdef():
                raise ParseError("malformed function definition")
            self.i = self.s.index(")", self.i) + 1
        self.skip_separators(semicolons=False)
        body = self.parse_command()
        return FuncDef(name.literal() or name.raw, body, self.s[start : self.i].strip())

    def parse_group(self, start: int) -> Compound:
        self.enter()
        body = self.parse_list("}")
        self.leave()
        self.i += 1
        cmd = Compound("group", body)
        self.read_trailing_redirects(cmd.redirects)
        cmd.raw = self.s[start : self.i].strip()
        return cmd

    def parse_case(self, start: int) -> Compound:
        self.skip_blanks()
        self.read_word()
        self.skip_separators(semicolons=False)
        if not (self.startswith("in") and self.word_ends_at(self.i + 2)):
            raise ParseError("'case' without 'in'")
        self.i += 2
        body = Script()
        self.enter()
        while True:
            self.skip_separators(semicolons=False)
            if self.startswith("esac") and self.word_ends_at(self.i + 4):
                self.i += 4
                break
            if self.i >= len(self.s):
                raise ParseError("'case' without 'esac'")
            if self.peek() == "(":
                self.i += 1
            while True:  # pattern words separated by |
                self.skip_blanks()
                if self.peek() == ")":
                    self.i += 1
                    break
                if self.peek() == "|":
                    self.i += 1
                    continue
                if self.i >= len(self.s) or self.peek() in "\n;&<>(":
                    raise ParseError("malformed case pattern")
                self.read_word()
            item = self.parse_list("case")
            body.pipelines.extend(item.pipelines)
            for term in (";;&", ";;", ";&"):
                if self.startswith(term):
                    self.i += len(term)
                    break
        self.leave()
        cmd = Compound("case", body)
        self.read_trailing_redirects(cmd.redirects)
        cmd.raw = self.s[start : self.i].strip()
        return cmd

    def read_dbracket(self, simple: Simple) -> None:
        """Words of ``[[ … ]]`` up to ``]]``; its ``< > && || ( ) !`` are plain words."""
        while True:
            self.skip_blanks()
            if self.i >= len(self.s) or self.peek() == "\n":
                raise ParseError("'[[' without ']]'")
            c = self.peek()
            if c in "<>&|()":
                j = self.i
                while j < len(self.s) and self.s[j] in "<>&|()":
                    j += 1
                simple.words.append(Word((Lit(self.s[self.i : j], False),), self.s[self.i : j]))
                self.i = j
                continue
            word = self.read_word()
            simple.words.append(word)
            if word.is_plain("]]"):
                return

    def read_trailing_redirects(self, redirects: list[Redirect]) -> None:
        while True:
            self.skip_blanks()
            j = self.i
            while j < len(self.s) and self.s[j].isdigit():
                j += 1
            fd = int(self.s[self.i : j]) if j > self.i and j < len(self.s) and self.s[j] in "<>" else None
            if fd is not None:
                self.i = j
            if not self.try_redirect(redirects, fd):
                return

    def skip_arith_command(self) -> None:
        depth = 0
        while self.i < len(self.s):
            c = self.s[self.i]
            self.i += 1
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    return
        raise ParseError("unterminated '(('")

    # -- redirections ----------------------------------------------------------------------
    _REDIRECT_OPS = ("&>>", "<<<", "<<-", "&>", ">>", ">|", "<>", "<&", ">&", "<<", "<", ">")

    def try_redirect(self, redirects: list[Redirect], fd: int | None) -> bool:
        if self.startswith("<(") or self.startswith(">("):
            return False
        for op in self._REDIRECT_OPS:
            if self.startswith(op):
                break
        else:
            return False
        self.i += len(op)
        self.skip_blanks()
        if self.i >= len(self.s) or self.peek() in "\n;|&)" or (self.peek() in "<>" and self.peek(1) != "("):
            raise ParseError(f"redirection {op!r} without a target")
        if op in ("<<", "<<-"):
            delim = self.read_word()
            text = delim.literal()
            quoted = any(isinstance(p, Lit) and p.quoted for p in delim.parts) or "\\" in delim.raw
            if text is None:
                text = delim.code_text()
            redirects.append(Redirect(op, fd, Word((), "")))
            self.pending.append((redirects, len(redirects) - 1, text, quoted, op == "<<-"))
            return True
        target = self.read_word()
        redirects.append(Redirect(op, fd, target))
        return True

    def read_heredocs(self) -> None:
        """Read the bodies of pending heredocs, starting at the current position (a line start)."""
        pending, self.pending = self.pending, []
        for redirects, index, delim, quoted, strip_tabs in pending:
            lines: list[str] = []
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                line = self.s[self.i : end]
                self.i = min(end + 1, len(self.s))
                if strip_tabs:
                    line = line.lstrip("\t")
                if line == delim:
                    break
                lines.append(line)
            body = "\n".join(lines) + ("\n" if lines else "")
            old = redirects[index]
            if quoted:
                word = Word((Lit(body, True),), body)
            else:
                word = _Parser(body).read_double_quoted_body()
            redirects[index] = Redirect(old.op, old.fd, word)

    # -- words -----------------------------------------------------------------------------
    def read_word(self) -> Word:
        start = self.i
        parts: list[Segment] = []
        buf: list[str] = []

        def flush() -> None:
            if buf:
                parts.append(Lit("".join(buf), False))
                buf.clear()

        if self.peek() in "<>" and self.peek(1) == "(":
            self.i += 2
            self.enter()
            script = self.parse_list(")")
            self.leave()
            self.i += 1
            parts.append(Sub(script, self.s[start : self.i], False, process=True))
        elif self.peek() == "~":
            j = self.i + 1
            while j < len(self.s) and (self.s[j].isalnum() or self.s[j] in "._-+"):
                j += 1
            if j >= len(self.s) or self.s[j] == "/" or self.s[j] in _META:
                parts.append(Tilde(self.s[self.i + 1 : j]))
                self.i = j
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in _META:
                break
            if c == "\\":
                nxt = self.peek(1)
                if nxt == "\n":
                    self.i += 2
                    continue
                if nxt == "":
                    raise ParseError("trailing backslash")
                flush()
                parts.append(Lit(nxt, True))
                self.i += 2
            elif c == "'":
                end = self.s.find("'", self.i + 1)
                if end < 0:
                    raise ParseError("unterminated single quote")
                flush()
                parts.append(Lit(self.s[self.i + 1 : end], True))
                self.i = end + 1
            elif c == '"':
                flush()
                self.i += 1
                parts.extend(self.read_double_quoted(closing='"'))
            elif c == "$" and self.peek(1) == "'":
                flush()
                parts.append(Lit(self.read_ansi_c(), True))
            elif c == "$" or c == "`":
                seg = self.read_dollar_or_backtick(quoted=False)
                if isinstance(seg, str):
                    buf.append(seg)
                else:
                    flush()
                    parts.append(seg)
            else:
                buf.append(c)
                self.i += 1
        flush()
        if self.i == start:
            raise ParseError(f"unexpected {self.peek()!r} at offset {self.i}")
        return Word(tuple(_merge(parts)), self.s[start : self.i])

    def read_ansi_c(self) -> str:
        """``$'…'`` with the common backslash escapes decoded."""
        self.i += 2
        out: list[str] = []
        escapes = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a", "e": "\x1b"}
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "'":
                self.i += 1
                return "".join(out)
            if c == "\\" and self.i + 1 < len(self.s):
                nxt = self.s[self.i + 1]
                out.append(escapes.get(nxt, "\\" + nxt))
                self.i += 2
                continue
            out.append(c)
            self.i += 1
        raise ParseError("unterminated $'…' string")

    def read_double_quoted(self, *, closing: str) -> list[Segment]:
        """Parts of a ``"…"`` string; the opening quote is already consumed."""
        parts: list[Segment] = []
        buf: list[str] = []
        while True:
            if self.i >= len(self.s):
                raise ParseError("unterminated double quote")
            c = self.s[self.i]
            if c == closing:
                self.i += 1
                break
            if c == "\\" and self.peek(1) in ('$', '`', '"', "\\", "\n"):
                if self.peek(1) != "\n":
                    buf.append(self.peek(1))
                self.i += 2
            elif c in "$`":
                seg = self.read_dollar_or_backtick(quoted=True)
                if isinstance(seg, str):
                    buf.append(seg)
                else:
                    if buf:
                        parts.append(Lit("".join(buf), True))
                        buf.clear()
                    parts.append(seg)
            else:
                buf.append(c)
                self.i += 1
        if buf:
            parts.append(Lit("".join(buf), True))
        return parts

    def read_double_quoted_body(self) -> Word:
        """A whole string read with double-quote rules (an unquoted heredoc body)."""
        parts: list[Segment] = []
        buf: list[str] = []
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "\\" and self.peek(1) in ("$", "`", "\\", "\n"):
                if self.peek(1) != "\n":
                    buf.append(self.peek(1))
                self.i += 2
            elif c in "$`":
                try:
                    seg = self.read_dollar_or_backtick(quoted=True)
                except ParseError:
                    buf.append(c)
                    self.i += 1
                    continue
                if isinstance(seg, str):
                    buf.append(seg)
                else:
                    if buf:
                        parts.append(Lit("".join(buf), True))
                        buf.clear()
                    parts.append(seg)
            else:
                buf.append(c)
                self.i += 1
        if buf:
            parts.append(Lit("".join(buf), True))
        return Word(tuple(parts), self.s)

    def read_dollar_or_backtick(self, *, quoted: bool) -> Segment | str:
        """An expansion at ``$`` or a backtick; a lone ``$`` comes back as the string ``"$"``."""
        start = self.i
        if self.s[self.i] == "`":
            self.i += 1
            inner: list[str] = []
            while True:
                if self.i >= len(self.s):
                    raise ParseError("unterminated backtick")
                c = self.s[self.i]
                if c == "\\" and self.peek(1) in ("`", "$", "\\"):
                    inner.append(self.peek(1))
                    self.i += 2
                    continue
                if c == "`":
                    self.i += 1
                    break
                inner.append(c)
                self.i += 1
            self.enter()
            script = _Parser("".join(inner))
            script.depth = self.depth
            parsed = script.parse_list(None)
            self.leave()
            return Sub(parsed, self.s[start : self.i], quoted)
        nxt = self.peek(1)
        if nxt == "(" and self.peek(2) == "(":
            self.i += 3
            depth = 2
            while self.i < len(self.s) and depth:
                depth += {"(": 1, ")": -1}.get(self.s[self.i], 0)
                self.i += 1
            if depth:
                raise ParseError("unterminated $((")
            return Arith(self.s[start : self.i])
        if nxt == "(":
            self.i += 2
            self.enter()
            script = self.parse_list(")")
            self.leave()
            self.i += 1
            return Sub(script, self.s[start : self.i], quoted)
        if nxt == "{":
            self.i += 2
            depth = 1
            while self.i < len(self.s) and depth:
                ch = self.s[self.i]
                if ch == "\\":
                    self.i += 2
                    continue
                depth += {"{": 1, "}": -1}.get(ch, 0)
                self.i += 1
            if depth:
                raise ParseError("unterminated ${")
            return Var(self.s[start + 2 : self.i - 1], quoted)
        if nxt and nxt in _NAME_START:
            j = self.i + 1
            while j < len(self.s) and self.s[j] in _NAME_CHARS:
                j += 1
            name = self.s[self.i + 1 : j]
            self.i = j
            return Var(name, quoted)
        if nxt and nxt in _SPECIAL_PARAMS:
            self.i += 2
            return Var(nxt, quoted)
        self.i += 1
        return "$"


def _merge(parts: list[Segment]) -> list[Segment]:
    """Join adjacent literals of the same quoting so words compare simply."""
    out: list[Segment] = []
    for part in parts:
        if out and isinstance(part, Lit) and isinstance(out[-1], Lit) and out[-1].quoted == part.quoted:
            out[-1] = Lit(out[-1].text + part.text, part.quoted)
        else:
            out.append(part)
    return out
