"""The lexical half of the shell parser: blanks, comments, words, quotes, expansions, heredocs.

:class:`Lexer` reads one source string by index. A word's command substitutions (``$( … )``,
backticks, ``<( … )``) hold whole scripts, so reading them calls back into
:meth:`Lexer.parse_list`, which the grammar (:class:`~._parser.Parser`) provides; a
:class:`Lexer` on its own cannot read a substitution. Quoting and expansion rules follow the
Bash Reference Manual, 5.2 ("Quoting", "Shell Expansions", "Here Documents").
"""

from __future__ import annotations

from ._syntax import Arith, Lit, ParseError, Redirect, Script, Segment, Sub, Tilde, Var, Word

__all__ = ["MAX_DEPTH", "META", "NAME_CHARS", "NAME_START", "Lexer"]

MAX_DEPTH = 40
"""Deepest nesting of substitutions, subshells and groups accepted before :class:`ParseError`."""

META = frozenset(" \t\n;&|()<>")
"""Characters that end an unquoted word."""

NAME_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
NAME_CHARS = NAME_START | set("0123456789")
_SPECIAL_PARAMS = set("@*#?-$!0123456789")
_HEX = "0123456789abcdefABCDEF"
_ANSI_C_LETTERS = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "v": "\v",
}


class Lexer:
    """Reads words and layout from ``src`` starting at ``i``; subclassed by the grammar."""

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

    def word_ends_at(self, j: int) -> bool:
        return j >= len(self.s) or self.s[j] in META

    def parse_list(self, term: str | None) -> Script:
        """Read a list of pipelines up to ``term`` (provided by the grammar)."""
        raise NotImplementedError

    # -- heredocs --------------------------------------------------------------------------
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
                word = type(self)(body).read_double_quoted_body()
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
            if j >= len(self.s) or self.s[j] == "/" or self.s[j] in META:
                parts.append(Tilde(self.s[self.i + 1 : j]))
                self.i = j
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in META:
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
            elif c == "$" and self.peek(1) == '"':
                self.i += 1  # $"…": a translated string, read as "…"
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
        """``$'…'`` decoded as bash does: the letter escapes, ``\\xHH``, octal ``\\NNN``,
        ``\\uHHHH``, ``\\UHHHHHHHH`` and ``\\cX``. An escape that cannot be decoded (a
        surrogate, a code point past U+10FFFF) raises :class:`ParseError`: failing closed."""
        self.i += 2
        out: list[str] = []
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "'":
                self.i += 1
                return "".join(out)
            if c == "\\" and self.i + 1 < len(self.s):
                out.append(self.ansi_c_escape())
                continue
            out.append(c)
            self.i += 1
        raise ParseError("unterminated $'…' string")

    def ansi_c_escape(self) -> str:
        """Decode the escape at ``self.i`` (a backslash) and move past it."""
        nxt = self.s[self.i + 1]
        if nxt in _ANSI_C_LETTERS:
            self.i += 2
            return _ANSI_C_LETTERS[nxt]
        if nxt == "c" and self.i + 2 < len(self.s):
            self.i += 3
            return chr(ord(self.s[self.i - 1].upper()) ^ 0x40)
        for lead, digits, size in (("x", _HEX, 2), ("u", _HEX, 4), ("U", _HEX, 8), ("", "01234567", 3)):
            if (lead and nxt == lead) or (not lead and nxt in digits):
                j = self.i + 1 + len(lead)
                k = j
                while k < len(self.s) and k - j < size and self.s[k] in digits:
                    k += 1
                if k == j:
                    break  # `\\x` with no digits stays as written
                code = int(self.s[j:k], 8 if not lead else 16)
                if not lead:
                    code &= 0xFF
                if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                    raise ParseError(f"undecodable escape {self.s[self.i : k]!r} in $'…'")
                self.i = k
                return chr(code)
        self.i += 2
        return "\\" + nxt

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
            if c == "\\" and self.peek(1) in ("$", "`", '"', "\\", "\n"):
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
            inner_reader = type(self)("".join(inner))
            inner_reader.depth = self.depth
            parsed = inner_reader.parse_list(None)
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
        if nxt and nxt in NAME_START:
            j = self.i + 1
            while j < len(self.s) and self.s[j] in NAME_CHARS:
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
