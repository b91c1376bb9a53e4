"""The extracted request of a permission prompt, normalised to one shape for every CLI.

:func:`normalize_request` turns the raw fields a ``patterns.toml`` extracts (``tool``,
``command``, ``file``, ``files``, ``diff``, ``url``, ``directory``, ``patterns``, ``server``,
``arguments``, ``description``, ``question``) into the request a decision carries: its ``kind``,
absolute resolved ``paths``, and ``complete`` / ``missing`` (the parts of its kind that could
not be read). A request that is not ``complete`` must never be approved automatically.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["KINDS", "REQUIRED", "kind_of", "normalize_request", "request_identity", "resolve_path"]

KINDS: tuple[str, ...] = ("bash", "edit", "write", "fetch", "directory", "mcp", "patch", "network", "other")
"""Every request ``kind``."""

REQUIRED: Mapping[str, tuple[str, ...]] = {
    "bash": ("command",),
    "edit": ("paths",),
    "write": ("paths",),
    "patch": ("paths",),
    "fetch": ("url",),
    "directory": ("directory",),
    "mcp": ("server", "tool", "arguments"),
    "network": ("url",),
    "other": ("kind",),
}
"""The parts each kind must name to be ``complete`` (``other`` never is)."""

_KIND_OF_TOOL: Mapping[str, str] = {
    "bash": "bash",
    "shell": "bash",
    "exec_command": "bash",
    "run_shell_command": "bash",
    "edit": "edit",
    "multiedit": "edit",
    "notebookedit": "edit",
    "write": "write",
    "create": "write",
    "apply_patch": "patch",
    "patch": "patch",
    "webfetch": "fetch",
    "fetch": "fetch",
    "websearch": "fetch",
    "web search": "fetch",
    "external_directory": "directory",
    "directory": "directory",
    "mcp": "mcp",
    "network": "network",
}

_FIELDS = ("kind", "tool", "question", "description", "command", "paths", "file", "diff", "url", "directory", "patterns", "server", "arguments")
_RULE_LINE = re.compile(r"^[ \t]*[╌─┄-]{8,}[ \t]*$")


def kind_of(tool: str | None) -> str:
    """The request kind of a tool name as a CLI shows it (case-insensitive; ``mcp__…`` names are
    ``mcp``); ``"other"`` when unknown."""
    if not tool:
        return "other"
    t = tool.strip().lower()
    if t.startswith("mcp__") or t.startswith("mcp:"):
        return "mcp"
    return _KIND_OF_TOOL.get(t, "other")


def resolve_path(path: str, cwd: str | None, *, home: str | None = None) -> str | None:
    """``path`` made absolute against ``cwd`` (``~`` against ``home``) and resolved through
    symlinks: the realpath of its longest existing prefix with the rest appended, normalised
    (``os.path.realpath``, non-strict). ``None`` when it cannot be made absolute (relative path
    and no ``cwd``, ``~`` and no ``home``, empty text)."""
    p = path.strip().strip("\"'`")
    if not p:
        return None
    if p == "~" or p.startswith("~/"):
        if not home:
            return None
        p = os.path.join(home, p[2:])
    elif not os.path.isabs(p):
        if not cwd or not os.path.isabs(cwd):
            return None
        p = os.path.join(cwd, p)
    return os.path.realpath(p)


def _split_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        items = [str(v) for v in value]
    else:
        items = re.split(r"[\n,]", str(value))
    return [s.strip() for s in items if s.strip()]


def _clean_diff(value: Any) -> str | None:
    if not value:
        return None
    lines = [ln for ln in str(value).split("\n") if not _RULE_LINE.match(ln)]
    text = textwrap.dedent("\n".join(lines)).strip("\n")
    return text or None


def _join_wrapped(value: str) -> str:
    """A value wrapped over several lines, joined back: each line break with the indentation
    and the CLI's left bar (``┃``, ``│``) around it removed."""
    return re.sub(r"[ \t]*\n[ \t]*(?:[┃│][ \t]*)?", "", value.strip())


def normalize_request(raw: Mapping[str, Any] | None, *, cwd: str | None = None, home: str | None = None) -> dict[str, Any]:
    """The normalised request of a permission prompt.

    Args:
        raw: the fields a ``patterns.toml`` extracted (``Classification.request``); may be ``None``.
        cwd: the agent's working directory (absolute), for relative paths.
        home: the agent's ``$HOME``, for ``~/`` paths.

    Returns:
        a new dict with every key of the contract (``kind``, ``tool``, ``question``,
        ``description``, ``command``, ``paths`` (absolute, resolved), ``file`` (= ``paths[0]``),
        ``diff``, ``url``, ``directory`` (absolute, resolved), ``patterns``, ``server``,
        ``arguments``, ``complete``, ``missing``) plus any other raw key (``accept_index``).
        Values not shown are ``None`` / ``[]``. ``missing`` lists the :data:`REQUIRED` parts of
        the kind that are empty; ``complete`` is ``not missing``.
    """
    src = dict(raw or {})
    out: dict[str, Any] = {
        k: v for k, v in src.items() if k not in _FIELDS and k not in ("files", "destination", "complete", "missing", "url_shown", "command_more", "file_more")
    }
    kind = str(src.get("kind") or "").lower() or kind_of(src.get("tool"))
    if kind not in KINDS:
        kind = "other"
    out["kind"] = kind
    for key in ("tool", "question", "description", "command", "url", "server", "arguments"):
        val = src.get(key)
        out[key] = str(val).strip() if val is not None and str(val).strip() else None
    url_broken = False
    if out["url"] and "://" in out["url"]:  # not a search query (WebSearch's is the "url")
        # a URL wrapped at the pane's edge comes as pieces on indented lines: joined back; any
        # other whitespace means it was not read as one URL
        out["url"] = _join_wrapped(out["url"])
        url_broken = bool(re.search(r"\s", out["url"]))
        shown = src.get("url_shown")  # a second rendering of the same URL (a title line)
        if shown and _join_wrapped(str(shown)) != out["url"]:
            url_broken = True
        host = str(src.get("host") or "").strip().lower()
        if host and not url_broken and "://" in out["url"]:
            url_broken = (urlsplit(out["url"]).hostname or "") != host  # the prompt names another host
    unresolved = False
    names: list[str] = []
    file_more = str(src.get("file_more") or "").strip()
    if file_more and src.get("file"):
        # shown whole (the pieces joined as they are drawn) but, not read exactly, incomplete below
        src["file"] = str(src["file"]).strip() + "".join(re.sub(r"^[ \t]*[┃│]?[ \t]*", "", ln).strip() for ln in file_more.split("\n"))
    for key in ("destination", "file", "files"):
        names.extend(_split_list(src.get(key)))
    paths: list[str] = []
    for name in names:
        r = resolve_path(name, cwd, home=home)
        if r is None:
            unresolved = True
        elif r not in paths:
            paths.append(r)
    out["paths"] = paths
    out["file"] = paths[0] if paths else None
    out["diff"] = _clean_diff(src.get("diff"))
    directory = src.get("directory")
    out["directory"] = resolve_path(str(directory), cwd, home=home) if directory else None
    out["patterns"] = _split_list(src.get("patterns"))
    missing = [part for part in REQUIRED[kind] if part != "kind" and not out.get(part)]
    if kind == "other":
        missing.append("kind")
    if unresolved and "paths" not in missing and kind in ("edit", "write", "patch"):
        missing.append("paths")  # one of the shown paths could not be made absolute
    if url_broken and "url" not in missing:
        missing.append("url")
    more = str(src.get("command_more") or "").strip()
    if more and out["command"]:
        # the command went on over more lines (wrapped by the CLI, or a multi-line command): the
        # screen does not say where the line breaks were spaces, so it is shown joined with
        # spaces but not understood exactly
        pieces = [re.split(r"[ \t]{8,}", re.sub(r"^[ \t]*[┃│]?[ \t]*", "", ln))[0].strip() for ln in more.split("\n")]
        out["command"] = " ".join([out["command"], *(p for p in pieces if p)])
        out["wrapped"] = True
        if "command" not in missing:
            missing.append("command")
    if file_more and "paths" not in missing:
        missing.append("paths")  # the path went on over more lines: not read whole
    basename = str(src.get("basename") or "").strip()
    if basename and names and "paths" not in missing and basename not in {os.path.basename(n.rstrip("/")) for n in names}:
        missing.append("paths")  # the question names another file than the path read: a cut or misread path
    if kind == "directory" and src.get("patterns_shown") and not out["patterns"]:
        missing.append("patterns")
    out.pop("patterns_shown", None)
    out["missing"] = missing
    out["complete"] = not missing
    return out


def request_identity(request: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """What an answer to ``request`` (a :func:`normalize_request` result) approves: kind, the
    command (runs of spaces and tabs as one space; line breaks kept, they separate commands),
    the paths, URL (no trailing ``/``), directory, MCP server and tool (its last ``__`` part:
    Claude Code 2.1.197 shows ``close`` for the tool ``mcp__elowen__close``), and ``complete``.
    Two readings of one request (its screen rendering, its channel data) have the same identity;
    a decision whose identity changed after it was judged must be judged again. ``()`` for
    ``None``."""
    if not isinstance(request, Mapping):
        return ()
    command = request.get("command")
    if command is not None:
        command = "\n".join(re.sub(r"[ \t]+", " ", line).strip() for line in str(command).strip().split("\n"))
    url = request.get("url")
    tool = str(request.get("tool") or "") if request.get("kind") == "mcp" else ""
    return (
        request.get("kind"),
        command,
        tuple(sorted(str(p) for p in request.get("paths") or ())),
        str(url).rstrip("/") if url else None,
        request.get("directory"),
        request.get("server"),
        tool.rsplit("__", 1)[-1] or None,
        bool(request.get("complete")),
    )
