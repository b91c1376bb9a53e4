"""Words and arguments: literal text of a parsed word, and a command's flags, option values and
operands (:func:`parse_args`), plus small walks over the syntax tree."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ._syntax import Command, Compound, Lit, Script, Simple, Sub, Var, Word

__all__ = [
    "Args",
    "all_vars",
    "drop_prefix",
    "first_lit",
    "is_echo_flag",
    "lit_word",
    "parse_args",
    "program_name",
    "script_commands",
    "simples",
    "spliced_subs",
    "word_text",
]


def first_lit(word: Word) -> str:
    """The text of the word's first part when that is literal (``""`` otherwise)."""
    part = word.parts[0] if word.parts else None
    return part.text if isinstance(part, Lit) else ""


def word_text(word: Word) -> str:
    """The word's literal value, or its code text when it has expansions."""
    lit = word.literal()
    return lit if lit is not None else word.code_text()


def lit_word(text: str) -> Word:
    """A quoted literal word of ``text``."""
    return Word((Lit(text, True),), text)


def drop_prefix(word: Word, n: int) -> Word:
    """The word without its first ``n`` characters (which lie in its first literal part)."""
    first = word.parts[0]
    assert isinstance(first, Lit)
    rest = first.text[n:]
    parts = ((Lit(rest, first.quoted),) if rest else ()) + word.parts[1:]
    return Word(parts, word.raw[n:] if word.raw.startswith(first.text[:n]) else word.raw)


def program_name(word: Word) -> str | None:
    """The program a command word names (its basename), or ``None`` when not a literal."""
    lit = word.literal()
    if lit is None or not lit:
        return None
    return lit.rsplit("/", 1)[-1] if "/" in lit.rstrip("/") else lit


@dataclass
class Args:
    """A command's arguments split by :func:`parse_args`."""

    flags: set[str] = field(default_factory=set)
    operands: list[Word] = field(default_factory=list)
    values: list[tuple[str, Word]] = field(default_factory=list)


def parse_args(args: list[Word], with_value: frozenset[str], *, clusters: bool = True, old_style: bool = False) -> Args:
    """Split ``args`` into flags (``-abc`` → ``-a -b -c`` plus ``-abc``; ``--x=y`` → ``--x``),
    option values and operands (after ``--`` everything is an operand)."""
    out = Args()
    i = 0
    ended = False
    while i < len(args):
        word = args[i]
        head = first_lit(word)
        lit = word.literal()
        if old_style and i == 0 and lit and re.fullmatch(r"[A-Za-z]+", lit):
            word = lit_word("-" + lit)
            head, lit = word.literal() or "", word.literal()
        if ended or not head.startswith("-") or head == "-" or (lit is not None and lit == "-"):
            out.operands.append(word)
            i += 1
            continue
        if lit == "--":
            ended = True
            i += 1
            continue
        if head.startswith("--"):
            name, eq, _ = head.partition("=")
            out.flags.add(name)
            if eq:
                out.values.append((name, drop_prefix(word, len(name) + 1)))
            elif name in with_value and i + 1 < len(args):
                out.values.append((name, args[i + 1]))
                i += 1
            i += 1
            continue
        name = head.split("=", 1)[0]
        if name in with_value:
            out.flags.add(name)
            if lit is not None and lit == name or len(word.parts) == 1 and head == name:
                if i + 1 < len(args):
                    out.values.append((name, args[i + 1]))
                    i += 1
            else:
                out.values.append((name, drop_prefix(word, len(name) + (head[len(name) : len(name) + 1] == "="))))
            i += 1
            continue
        out.flags.add(name)
        if clusters and len(name) > 2 and not name[1].isdigit():
            for k, ch in enumerate(name[1:], start=2):
                opt = "-" + ch
                out.flags.add(opt)
                if opt in with_value:
                    if k < len(head) or len(word.parts) > 1:
                        out.values.append((opt, drop_prefix(word, k)))
                    elif i + 1 < len(args):
                        out.values.append((opt, args[i + 1]))
                        i += 1
                    break
        i += 1
    return out


def is_echo_flag(word: Word) -> bool:
    """``echo -n`` / ``-e`` style flags, which are not part of the printed text."""
    return bool(re.fullmatch(r"-[neE]+", word.literal() or ""))


def all_vars(word: Word) -> list[Var]:
    """The parameter expansions directly in ``word``."""
    return [p for p in word.parts if isinstance(p, Var)]


def spliced_subs(word: Word) -> list[Sub]:
    """Command substitutions (not process substitutions) the outer shell splices into
    ``word``: their output becomes part of the code a ``-c``/``eval`` runs."""
    return [sub for sub in word.subs() if not sub.process]


def simples(cmd: Command) -> list[Simple]:
    """Every simple command in ``cmd``, including those in its words' substitutions."""
    if isinstance(cmd, Simple):
        out = [cmd]
        for word in cmd.words:
            for sub in word.subs():
                out.extend(s for c in script_commands(sub.script) for s in simples(c))
        return out
    if isinstance(cmd, Compound):
        return [s for c in script_commands(cmd.body) for s in simples(c)]
    return simples(cmd.body)


def script_commands(script: Script) -> list[Command]:
    """The commands of every pipeline of ``script``, in order."""
    return [c for p in script.pipelines for c in p.commands]
