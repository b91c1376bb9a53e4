"""What a command line defines for the commands after it: symbolic links (``ln -s ~ x``),
aliases (``alias x='rm -rf ~'``) and shell functions (``f(){ rm -rf "$1"; }``).

The analyzer records them in the :class:`~._expand.Ctx` as it walks the line, so that
``ln -s ~ x && rm -rf x/`` deletes the home directory, ``alias x='rm -rf ~'; x`` runs
``rm -rf ~`` and ``f ~`` runs ``f``'s body with ``$1`` = ``~``. Bash itself only expands an
alias defined on an earlier line, and only when ``expand_aliases`` is on; the analysis expands it
anyway (failing closed).
"""

from __future__ import annotations

import posixpath
import re

from ._expand import Ctx, expand, resolve
from ._paths import norm
from ._syntax import Word
from ._words import drop_prefix, first_lit, lit_word, parse_args

__all__ = ["bind_arguments", "record_aliases", "record_link"]

_LN_OPTIONS = frozenset({"-t", "--target-directory", "-S", "--suffix"})


def record_link(args: list[Word], ctx: Ctx) -> None:
    """Record the links ``ln [-s] TARGET… LINK`` creates in ``ctx.links`` (a target that
    cannot be resolved is recorded as ``None``: unknown). Hard links are recorded too: a write
    through one changes the original."""
    parsed = parse_args(args, _LN_OPTIONS)
    symbolic = bool(parsed.flags & {"-s", "--symbolic"})
    operands = parsed.operands
    directory = next((value for opt, value in parsed.values if opt in ("-t", "--target-directory")), None)
    pairs: list[tuple[Word, Word | None]] = []
    if directory is not None:
        pairs = [(op, None) for op in operands]
    elif len(operands) == 1:
        pairs = [(operands[0], None)]
    elif len(operands) == 2:
        pairs = [(operands[0], operands[1])]
    elif len(operands) > 2:
        directory = operands[-1]
        pairs = [(op, None) for op in operands[:-1]]
    for target, link_word in pairs:
        link = _link_path(target, link_word, directory, ctx)
        if link is None:
            continue
        ctx.links[link] = _target_path(target, link, symbolic, ctx)


def _link_path(target: Word, link: Word | None, directory: Word | None, ctx: Ctx) -> str | None:
    """The absolute path of the link ``ln`` creates for ``target``."""
    if link is not None:
        paths = resolve(link, ctx)
        return paths[0].path if paths and len(paths) == 1 and paths[0].pattern is None else None
    base = posixpath.basename((target.literal() or "").rstrip("/"))
    if not base:
        return None
    if directory is None:
        return norm(posixpath.join(ctx.cwd, base)) if ctx.cwd else None
    paths = resolve(directory, ctx, follow_final=True)
    return norm(posixpath.join(paths[0].path, base)) if paths and len(paths) == 1 and paths[0].pattern is None else None


def _target_path(target: Word, link: str, symbolic: bool, ctx: Ctx) -> str | None:
    """What the link points to: a relative symbolic target is taken from the link's directory."""
    cands = expand(target, ctx)
    if cands is None or len(cands) != 1 or cands[0][1] >= 0:
        return None
    text = cands[0][0]
    if not text.startswith("/"):
        base = posixpath.dirname(link) if symbolic else ctx.cwd
        if base is None:
            return None
        text = posixpath.join(base, text)
    paths = resolve(lit_word(text), ctx, follow_final=True)
    return paths[0].path if paths and len(paths) == 1 else None


def record_aliases(args: list[Word], ctx: Ctx) -> None:
    """``alias NAME=VALUE…``: record each alias (``None`` when the value is not a literal);
    ``unalias`` is handled by the caller."""
    for word in args:
        head = first_lit(word)
        name, eq, _ = head.partition("=")
        if eq and re.fullmatch(r"[^\s/$`=]+", name):
            value = drop_prefix(word, len(name) + 1)
            ctx.aliases[name] = value.literal()


def bind_arguments(args: list[Word], ctx: Ctx) -> None:
    """Set ``$1``…, ``$@``, ``$*`` and ``$#`` in ``ctx`` for a function called with ``args``
    (each ``None`` when an argument cannot be known; ``$@`` stands for any one argument)."""
    everything: list[str] | None = []
    for index, word in enumerate(args, start=1):
        cands = expand(word, ctx)
        values = None if cands is None else [text for text, _ in cands]
        ctx.env[str(index)] = values
        if values is None:
            everything = None
        elif everything is not None:
            everything.extend(values)
    for index in range(len(args) + 1, 10):
        ctx.env[str(index)] = [""]
    ctx.env["@"] = ctx.env["*"] = everything if everything else ([""] if everything == [] else None)
    ctx.env["#"] = [str(len(args))]
