"""Static expansion: what a word of a command line can stand for, given what is known in that
line (the working directory, ``$HOME``, variables assigned earlier, ``$(pwd)``).

A word expands to candidate strings (:func:`expand`) and then to absolute targets
(:func:`resolve`); ``None`` means "cannot be known statically", which callers treat as
destructive for anything but a read. :class:`Ctx` carries that knowledge along one command line.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field

from ._paths import MAX_CANDIDATES, Target, brace_expand, glob_at, inside, norm
from ._syntax import Command, Lit, Simple, Sub, Tilde, Var, Word

__all__ = ["Ctx", "expand", "resolve", "through_links", "with_cwd"]

MAX_LINK_HOPS = 8
"""Most symbolic links followed for one path before it counts as unresolvable (a loop)."""


@dataclass
class Ctx:
    """What is known while one command line is analysed.

    ``cwd`` / ``checkout`` are absolute (``None``: unknown); ``home`` is the user's home;
    ``env`` maps a variable assigned in the line to its candidate values (``None``: assigned a
    value that cannot be known); ``downloaded`` holds paths a ``curl``/``wget`` earlier in the
    line wrote (shared by every child); ``remote`` is set for code run by ``ssh host CMD``;
    ``depth`` counts nested code (``bash -c``, ``eval``…). ``links`` maps a link the line
    created (``ln -s ~ x``) to what it points to (``None``: unknown); ``functions`` and
    ``aliases`` hold the shell functions and aliases it defined; ``real_checkout`` is the
    checkout with the file system's symbolic links resolved (``None`` until first needed);
    ``written`` maps a file the line wrote with known text (``echo 'rm -rf ~' > x.sh``) to that
    text, so running it later in the line is analysed as code. ``keep`` holds the folders that
    are never scratch space (the agent's home, Elowen's home: :func:`~._paths.not_scratch`).
    """

    cwd: str | None
    checkout: str | None
    home: str
    env: dict[str, list[str] | None]
    downloaded: set[str]
    remote: bool = False
    depth: int = 0
    links: dict[str, str | None] = field(default_factory=dict)
    functions: dict[str, Command] = field(default_factory=dict)
    aliases: dict[str, str | None] = field(default_factory=dict)
    real_checkout: str | None = None
    written: dict[str, str] = field(default_factory=dict)
    keep: tuple[str, ...] = ()

    def child(self) -> Ctx:
        """A copy for a subshell or pipeline stage: its own ``cwd``, ``env``, functions and
        aliases; the same downloads and links (links are on disk, shared by every process)."""
        return Ctx(
            self.cwd,
            self.checkout,
            self.home,
            dict(self.env),
            self.downloaded,
            self.remote,
            self.depth,
            self.links,
            dict(self.functions),
            dict(self.aliases),
            self.real_checkout,
            self.written,
            self.keep,
        )

    @property
    def checkout_label(self) -> str:
        """The checkout as a reason names it."""
        return "the remote host's checkout" if self.remote else (self.checkout or "the checkout")


def with_cwd(ctx: Ctx, cwd: str | None) -> Ctx:
    """A child of ``ctx`` running in ``cwd``."""
    inner = ctx.child()
    inner.cwd = cwd
    return inner


def expand(word: Word, ctx: Ctx) -> list[tuple[str, int]] | None:
    """Candidate values of ``word`` with the offset of the first unquoted wildcard (-1 if
    none), or ``None`` when a part cannot be known statically."""
    cands: list[tuple[str, int]] = [("", -1)]
    for index, part in enumerate(word.parts):
        values: list[tuple[str, bool]]
        if isinstance(part, Lit):
            values = [(part.text, False)] if part.quoted else [(v, True) for v in brace_expand(part.text)]
        elif isinstance(part, Tilde):
            if index != 0 or part.user == "-":
                return None
            if part.user == "":
                values = [(ctx.home, False)]
            elif part.user == "+":
                if ctx.cwd is None:
                    return None
                values = [(ctx.cwd, False)]
            else:
                values = [("/root" if part.user == "root" else "/home/" + part.user, False)]
        elif isinstance(part, Var):
            known = var_values(part.name, ctx)
            if known is None:
                return None
            values = [(v, not part.quoted) for v in known]
        elif isinstance(part, Sub):
            value = sub_value(part, ctx)
            if value is None:
                return None
            values = [(value, False)]
        else:
            return None
        nxt: list[tuple[str, int]] = []
        for text, wild in cands:
            for value, may_glob in values:
                at = wild
                if at < 0 and may_glob:
                    g = glob_at(value)
                    at = len(text) + g if g >= 0 else -1
                nxt.append((text + value, at))
        cands = nxt[:MAX_CANDIDATES]
    return cands


def var_values(name: str, ctx: Ctx) -> list[str] | None:
    """The candidate values of ``$name`` (``None``: unknown); ``$HOME`` and ``$PWD`` are known."""
    if name in ctx.env:
        return ctx.env[name]
    if name == "HOME" and not ctx.remote:
        return [ctx.home]
    if name == "PWD" and ctx.cwd is not None:
        return [ctx.cwd]
    return None


def sub_value(sub: Sub, ctx: Ctx) -> str | None:
    """The value of ``$(pwd)`` or ``$(git rev-parse --show-toplevel)``; ``None`` for anything else."""
    if sub.process or len(sub.script.pipelines) != 1 or len(sub.script.pipelines[0].commands) != 1:
        return None
    cmd = sub.script.pipelines[0].commands[0]
    if not isinstance(cmd, Simple):
        return None
    argv = [w.literal() for w in cmd.words]
    if argv == ["pwd"]:
        return ctx.cwd
    if argv == ["git", "rev-parse", "--show-toplevel"]:
        return ctx.checkout
    return None


def resolve(word: Word, ctx: Ctx, *, follow_final: bool = False) -> list[Target] | None:
    """The absolute targets ``word`` can name (relative ones taken from ``ctx.cwd``), or
    ``None`` when it cannot be known statically. A glob whose pattern climbs (``..``) becomes
    ``Target("/", "*")``. Symbolic links are followed (:func:`through_links`): every directory
    on the way, and the last component too with ``follow_final`` (a write, a ``cd``) or when
    the word ends in ``/`` (``rm -rf link/`` deletes what the link points to)."""
    cands = expand(word, ctx)
    if cands is None:
        return None
    out: list[Target] = []
    for text, wild in cands:
        if text == "":
            continue
        if not text.startswith("/"):
            if ctx.cwd is None:
                return None
            prefix = ctx.cwd.rstrip("/") + "/"
            text = prefix + text
            wild = wild + len(prefix) if wild >= 0 else -1
        if wild < 0:
            path = through_links(norm(text), ctx, follow_final or text.endswith(("/", "/.")))
            if path is None:
                return None
            out.append(Target(path))
            continue
        slash = text.rfind("/", 0, wild)
        directory, pattern = text[:slash] or "/", text[slash + 1 :]
        if ".." in pattern.split("/"):
            out.append(Target("/", "*"))
        else:
            path = through_links(norm(directory), ctx, True)
            if path is None:
                return None
            out.append(Target(path, pattern))
    return out


def through_links(path: str, ctx: Ctx, follow_final: bool) -> str | None:
    """``path`` with symbolic links resolved: first the links the same line created
    (``ctx.links``), then, for a path that seems to lie in the checkout, the file system's
    (a link in the checkout may point anywhere). ``None`` when a link's target is unknown or
    there are more than :data:`MAX_LINK_HOPS`."""
    for _ in range(MAX_LINK_HOPS):
        for link, dest in ctx.links.items():
            if path.startswith(link + "/") or (follow_final and path == link):
                if dest is None:
                    return None
                path = norm(dest + path[len(link) :])
                break
        else:
            break
    else:
        return None
    if ctx.remote or ctx.checkout is None or not inside(path, ctx.checkout) or path == ctx.checkout:
        return path
    head, tail = (path, "") if follow_final else posixpath.split(path)
    try:
        if ctx.real_checkout is None:
            ctx.real_checkout = os.path.realpath(ctx.checkout)
        real = os.path.realpath(head)
    except (OSError, ValueError):  # a NUL byte, a path too long: no such file can be known
        return None
    real = posixpath.join(real, tail) if tail else real
    if inside(real, ctx.real_checkout):
        return path
    return real
