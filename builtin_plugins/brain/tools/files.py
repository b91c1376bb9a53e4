"""File tools: read, write, edit, list — every path through the path guard, which confines
them to the user's project folders (symlink and ``..`` escapes refused; see
``elowen.core.pathguard``)."""

from __future__ import annotations

from typing import Any

from elowen_sdk import PathGuardError, Tool

from .env import ToolError, require_env, require_guard

__all__ = ["tools"]

MAX_READ = 100_000
"""Characters returned by one ``files.read`` (ask again with ``offset`` for more)."""


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
    text = guard.read_text(path)
    offset = max(0, int(offset))
    chunk = text[offset : offset + MAX_READ]
    return {"path": str(guard.resolve(path)), "content": chunk, "offset": offset, "truncated": offset + len(chunk) < len(text)}


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
    text = guard.read_text(path)
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
        Tool("files.read", "Read a text file in the user's projects.", read,
             _obj({"path": path, "offset": {"type": "integer", "minimum": 0, "description": "character offset"}}, ["path"])),
        Tool("files.write", "Create or overwrite a text file in the user's projects.", write,
             _obj({"path": path, "content": {"type": "string"}}, ["path", "content"])),
        Tool("files.edit", "Replace an exact piece of text in a file (it must occur once unless replace_all).", edit,
             _obj({"path": path, "old": {"type": "string"}, "new": {"type": "string"}, "replace_all": {"type": "boolean"}},
                  ["path", "old", "new"])),
        Tool("files.list", "List a folder in the user's projects.", listdir, _obj({"path": path}, [])),
    ]
