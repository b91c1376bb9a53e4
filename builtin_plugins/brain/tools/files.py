"""File tools: read, write, edit, list — every path through the path guard, which confines
them to the user's project folders (symlink and ``..`` escapes refused; see
:class:`elowen_sdk.PathGuard`).

The handlers run in a worker thread (``trio.to_thread``), never on the event loop: a slow disk
or a huge folder cannot stall the daemon. Only regular files are read (a FIFO, device or socket
is refused before any read), and ``files.read`` reads at most :data:`MAX_READ_BYTES` bytes;
``files.edit`` refuses files larger than that.
"""

from __future__ import annotations

import codecs
import contextvars
import functools
from collections.abc import Callable
from typing import Any

import trio

from elowen_sdk import PathGuardError, Tool

from .env import ToolError, require_env, require_guard

__all__ = ["tools"]

MAX_READ = 100_000
"""Characters returned by one ``files.read`` (ask again with ``offset`` for more)."""

MAX_READ_BYTES = 8 * 1024 * 1024
"""Bytes of a file ``files.read`` reads at most (characters past them are out of reach), and
the largest file ``files.edit`` changes."""


def _off_loop(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (sync) as an async handler run in a worker thread, with the caller's context
    (the tool environment is a context variable)."""

    @functools.wraps(fn)
    async def handler(**kwargs: Any) -> Any:
        ctx = contextvars.copy_context()
        return await trio.to_thread.run_sync(functools.partial(ctx.run, fn, **kwargs))

    return handler


def _guarded(fn: Any) -> Any:
    def wrapper(**kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except PathGuardError as exc:
            raise ToolError(f"refused: {exc}") from None
        except FileNotFoundError as exc:
            raise ToolError(f"no such file: {exc.filename or kwargs.get('path')}") from None
        except IsADirectoryError:
            raise ToolError(f"{kwargs.get('path')} is a folder; use files.list") from None
        except NotADirectoryError:
            raise ToolError(f"{kwargs.get('path')} is not a folder") from None
        except UnicodeDecodeError:
            raise ToolError(f"{kwargs.get('path')} is not UTF-8 text") from None
        except OSError as exc:
            raise ToolError(f"{kwargs.get('path')}: {exc.strerror or exc}") from None

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


@_guarded
def read(path: str, offset: int = 0) -> dict[str, Any]:
    """``{"path", "content", "offset", "truncated"}``: up to :data:`MAX_READ` characters from ``offset``."""
    guard = require_guard(require_env())
    offset = max(0, int(offset))
    limit = min(MAX_READ_BYTES, (offset + MAX_READ) * 4 + 4)  # UTF-8: at most 4 bytes a character
    data = guard.read_bytes(path, limit=limit)
    cut = len(data) >= limit
    text = codecs.getincrementaldecoder("utf-8")().decode(data, final=not cut)
    chunk = text[offset : offset + MAX_READ]
    return {"path": str(guard.resolve(path)), "content": chunk, "offset": offset, "truncated": cut or offset + len(chunk) < len(text)}


@_guarded
def write(path: str, content: str) -> dict[str, Any]:
    """Create or replace a text file; ``{"path", "bytes"}``."""
    guard = require_guard(require_env())
    size = guard.write_text(path, content)
    return {"path": str(guard.resolve(path, write=True)), "bytes": size}


@_guarded
def edit(path: str, old: str, new: str, replace_all: bool = False) -> dict[str, Any]:
    """Replace the exact text ``old`` by ``new``; ``old`` must occur once unless ``replace_all``.
    ``{"path", "replacements"}``."""
    guard = require_guard(require_env())
    if not old:
        raise ToolError("old must not be empty")
    data = guard.read_bytes(path, limit=MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        raise ToolError(f"{path} is larger than {MAX_READ_BYTES} bytes; files.edit does not change files that large")
    text = data.decode("utf-8")
    count = text.count(old)
    if count == 0:
        raise ToolError(f"the text to replace was not found in {path}")
    if count > 1 and not replace_all:
        raise ToolError(f"the text to replace occurs {count} times in {path}; give more context or set replace_all")
    guard.write_text(path, text.replace(old, new) if replace_all else text.replace(old, new, 1))
    return {"path": str(guard.resolve(path, write=True)), "replacements": count if replace_all else 1}


@_guarded
def listdir(path: str = ".") -> dict[str, Any]:
    """``{"path", "entries"}``: names in a folder, folders with a trailing ``/``."""
    guard = require_guard(require_env())
    real = guard.resolve(path)
    entries = []
    for name in guard.listdir(path):
        entries.append(name + "/" if (real / name).is_dir() else name)
    return {"path": str(real), "entries": entries[:2000], "truncated": len(entries) > 2000}


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def tools() -> list[Tool]:
    """The four file tools."""
    path = {"type": "string", "description": "file path, relative to the project folder or absolute"}
    return [
        Tool(
            "files.read",
            "Read a text file in the user's projects.",
            _off_loop(read),
            _obj({"path": path, "offset": {"type": "integer", "minimum": 0, "description": "character offset"}}, ["path"]),
        ),
        Tool(
            "files.write",
            "Create or overwrite a text file in the user's projects.",
            _off_loop(write),
            _obj({"path": path, "content": {"type": "string"}}, ["path", "content"]),
        ),
        Tool(
            "files.edit",
            "Replace an exact piece of text in a file (it must occur once unless replace_all).",
            _off_loop(edit),
            _obj({"path": path, "old": {"type": "string"}, "new": {"type": "string"}, "replace_all": {"type": "boolean"}}, ["path", "old", "new"]),
        ),
        Tool("files.list", "List a folder in the user's projects.", _off_loop(listdir), _obj({"path": path}, [])),
    ]
