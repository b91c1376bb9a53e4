"""The syntax tree :func:`~elowen_sdk.destructive.shell.parse` builds from a command line.

- :class:`Script` — pipelines separated by ``;``, ``&``, ``&&``, ``||`` or newlines;
- :class:`Pipeline` — commands joined by ``|`` / ``|&``;
- :class:`Simple` — assignments, words and redirections of one simple command;
- :class:`Compound` — a subshell ``( … )``, a group ``{ …; }`` or a ``case`` body;
- :class:`FuncDef` — ``name() { … }`` / ``function name { … }``.

Words keep their structure as :data:`Segment` parts: literal text (with whether it was quoted),
``$VAR`` / ``${…}`` expansions, ``~`` prefixes, ``$(…)`` / backtick / ``<(…)`` substitutions
(parsed recursively into a :class:`Script`) and ``$((…))`` arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ElowenError

__all__ = [
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
]


class ParseError(ElowenError, ValueError):
    """The text is not a command line the parser can read (unbalanced quotes, too deep, …)."""


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


Segment = Lit | Var | Tilde | Arith | Sub


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
        if len(self.parts) != 1:
            return False
        part = self.parts[0]
        return type(part) is Lit and not part.quoted and part.text == text

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


Command = Simple | Compound | FuncDef


@dataclass(slots=True)
class Pipeline:
    """Commands whose stdout feeds the next one's stdin; ``background`` for a trailing ``&``."""

    commands: list[Command] = field(default_factory=list)
    background: bool = False


@dataclass(slots=True)
class Script:
    """A list of pipelines run in order (``;``, ``&&``, ``||``, ``&`` and newlines)."""

    pipelines: list[Pipeline] = field(default_factory=list)
