"""Pipelines: what a stage reads on stdin, judged from the stages before it.

``printf 'rm -rf /' | sh`` feeds the shell a known text; ``curl … | sh`` code downloaded at run
time; ``… | base64 -d | sh`` code nobody can see; ``find . -name x | xargs rm`` a listing of
paths. :func:`pipe_input` names which (a :data:`~._wrappers.Stdin`), using the ``[runners]``
lists of the rules (downloaders, transformers, printers, path listers).
"""

from __future__ import annotations

import re
from typing import Any

from ._expand import Ctx
from ._rules import Rules
from ._syntax import Command, Lit, Simple, Word
from ._words import first_lit, is_echo_flag, lit_word, parse_args, simples
from ._wrappers import Invocation, Stdin, unwrap

__all__ = [
    "FIND_FILTERS",
    "download_detail",
    "downloader_in",
    "everything_in",
    "find_roots",
    "found_below",
    "has_download",
    "lister_targets",
    "pipe_input",
    "printed_text",
    "render_printf",
]


def pipe_input(rules: Rules, stages: list[Command], index: int, ctx: Ctx) -> Stdin | None:
    """What stage ``index`` of ``stages`` reads on stdin (``None``: nothing known to matter)."""
    if index == 0:
        return None
    prev = stages[index - 1]
    if isinstance(prev, Simple) and prev.words:
        inv = unwrap(rules, prev.words, ctx, None)
        if inv is not None and inv.program in rules.runners["transformers"]:
            upstream = pipe_input(rules, stages, index - 1, ctx)
            note = f" (decoding code downloaded by {upstream[1]})" if upstream and upstream[0] == "download" else ""
            return ("unknown", f"`{prev.raw}`{note}")
    for stage in stages[:index]:
        detail = downloader_in(rules, stage, ctx)
        if detail:
            return ("download", detail)
    prev = stages[index - 1]
    if not isinstance(prev, Simple) or not prev.words:
        return None
    inv = unwrap(rules, prev.words, ctx, None)
    if inv is None or inv.program is None:
        return None
    program, args = inv.program, inv.words[1:]
    text = printed_text(rules, inv, prev)
    if text is not None:
        return ("text", text)
    if program == "cat" and not args:
        return None
    if program in rules.runners["passthrough"]:
        return pipe_input(rules, stages, index - 1, ctx)
    if program in rules.runners["path_listers"]:
        found = lister_targets(program, args)
        return ("paths", found) if found is not None else None
    return None


def printed_text(rules: Rules, inv: Invocation, cmd: Simple) -> Word | None:
    """The text a printer prints (``echo``'s operands, ``printf``'s format filled with its
    arguments, ``cat``'s here-document), or ``None`` when the command is not one of those."""
    program, args = inv.program, inv.words[1:]
    if program == "printf" and args and args[0].literal() is not None:
        return lit_word(render_printf(args[0].literal() or "", [w.literal() for w in args[1:]]) or "")
    if program in rules.secrets["printers"]:
        parts: list[Any] = []
        for k, word in enumerate(a for a in args if not (is_echo_flag(a) and program == "echo")):
            if k:
                parts.append(Lit(" ", True))
            parts.extend(word.parts)
        return Word(tuple(parts), " ".join(w.raw for w in args))
    if program == "cat" and not args:
        for redirect in cmd.redirects:
            if redirect.op in ("<<", "<<-", "<<<"):
                return redirect.target
    return None


_PRINTF_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "a": "\a", "e": "\x1b", "0": "\0", '"': '"', "'": "'"}
_PRINTF_TOKEN = re.compile(r"\\(.)|%(%|[-+ #0-9.]*[sbdiqc])", re.DOTALL)


def render_printf(fmt: str, args: list[str | None]) -> str | None:
    """What ``printf FMT ARGS…`` prints (escapes decoded, ``%s``-style conversions filled in,
    the format reused while arguments remain); ``None`` when an argument is not a literal."""
    if any(a is None for a in args):
        return None
    values = [a or "" for a in args]
    out: list[str] = []
    for _ in range(16):

        def fill(m: re.Match[str]) -> str:
            if m.group(1) is not None:
                return _PRINTF_ESCAPES.get(m.group(1), "\\" + m.group(1))
            if m.group(2) == "%":
                return "%"
            return values.pop(0) if values else ""

        out.append(_PRINTF_TOKEN.sub(fill, fmt))
        if not values or "%" not in fmt:
            break
    return "".join(out)


def lister_targets(program: str, args: list[Word]) -> list[Word] | None:
    """The paths a lister prints, as words: ``find . -name x`` → some entries below ``.``;
    ``find .`` or ``ls`` → everything there."""
    dot = [lit_word(".")]
    if program in ("find", "fd", "fdfind"):
        roots = find_roots(args)
        if program != "find":
            roots = roots[1:]
        roots = roots or dot
        lits = {w.literal() for w in args}
        return [found_below(r) for r in roots] if (program != "find" or lits & FIND_FILTERS) else roots
    if program == "ls":
        return [everything_in(w) for w in ([w for w in args if not first_lit(w).startswith("-")] or dot)]
    if program == "git":
        return [found_below(dot[0])] if any(w.literal() in ("ls-files", "diff") for w in args) else None
    parsed = parse_args(args, frozenset({"-e", "--regexp", "-f", "--file", "-m", "--max-count", "-A", "-B", "-C", "-g", "--glob", "-t", "--type"}))
    operands = parsed.operands if parsed.flags & {"-e", "--regexp", "-f", "--file"} else parsed.operands[1:]
    return [found_below(w) for w in (operands or dot)]


def downloader_in(rules: Rules, cmd: Command, ctx: Ctx) -> str | None:
    """The text of a downloader command (``curl``, ``wget``…) in ``cmd``, if any."""
    for simple in simples(cmd):
        if simple.words:
            inv = unwrap(rules, simple.words, ctx, None)
            if inv is not None and inv.program in rules.runners["downloaders"]:
                return simple.raw
    return None


def has_download(rules: Rules, word: Word) -> bool:
    """Whether a substitution in ``word`` runs a downloader."""
    return download_detail(rules, word) is not None


def download_detail(rules: Rules, word: Word) -> str | None:
    """The downloader command inside a substitution of ``word``, if any."""
    for sub in word.subs():
        for pipeline in sub.script.pipelines:
            for cmd in pipeline.commands:
                detail = downloader_in(rules, cmd, Ctx(None, None, "", {}, set()))
                if detail:
                    return detail
    return None


FIND_FILTERS = frozenset(
    {
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-wholename",
        "-regex",
        "-iregex",
        "-type",
        "-newer",
        "-mtime",
        "-mmin",
        "-atime",
        "-ctime",
        "-empty",
        "-size",
        "-user",
        "-group",
        "-perm",
        "-links",
        "-lname",
    }
)


def find_roots(args: list[Word]) -> list[Word]:
    """The starting points of a ``find`` command (its operands before the first expression)."""
    roots: list[Word] = []
    for word in args:
        head = first_lit(word)
        if head in ("-H", "-L", "-P"):
            continue
        if head.startswith(("-", "(", "!")):
            break
        roots.append(word)
    return roots


def found_below(root: Word) -> Word:
    """Some entries below ``root`` (a wildcard that matches neither ``.git`` nor everything)."""
    return Word(root.parts + (Lit("/", True), Lit("*", False), Lit("{}", True)), root.raw + "/…")


def everything_in(root: Word) -> Word:
    """Every entry of ``root`` (``root/*``)."""
    return Word(root.parts + (Lit("/", True), Lit("*", False)), root.raw + "/*")
