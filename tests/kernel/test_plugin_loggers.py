"""Plugins log under ``elowen.plugin.<plugin name>`` (the name of ``ctx.log``; a child such as
``elowen.plugin.brain.turns`` is fine) and write no hand-written ``"<plugin>: "`` prefix: the log
format already prints the logger's name.

The walk reads every module of ``builtin_plugins`` and of the packages under ``contrib/`` with
:mod:`ast` and refuses ``getLogger(__name__)`` (a module path such as ``elowen_builtins.tmux.server``
is not the plugin's name), a ``getLogger("elowen.…")`` outside ``elowen.plugin.<its name>``, and a
log call whose message starts with a plugin's name and a colon.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LEVELS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})
LOGGERS = frozenset({"log", "logger", "_log", "_logger"})


def _plugin_packages() -> list[tuple[str, Path]]:
    """``(manifest name, package folder)`` of every builtin and contrib plugin."""
    found: list[tuple[str, Path]] = []
    for manifest in sorted([*(REPO / "builtin_plugins").glob("*/elowen-plugin.toml"), *(REPO / "contrib").glob("*/*/elowen-plugin.toml")]):
        if "build" in manifest.relative_to(REPO).parts:
            continue
        name = tomllib.loads(manifest.read_text(encoding="utf-8"))["name"]
        found.append((name, manifest.parent))
    return found


PLUGINS = _plugin_packages()
#: Every prefix a message must not start with: the plugins' names and their package folders.
PREFIXES = sorted({n for n, _ in PLUGINS} | {p.name for _, p in PLUGINS} | {"overseer", "relay", "parked"}, key=len, reverse=True)


def _is_logger(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in LOGGERS
    return isinstance(node, ast.Attribute) and node.attr in LOGGERS


def _message_head(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return None


def problems(source: str, plugin: str) -> list[str]:
    """What is wrong with the logging of one module of plugin ``plugin`` (empty: nothing)."""
    out: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute | ast.Name):
            continue
        func = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        if func == "getLogger" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Name) and arg.id == "__name__":
                out.append(f'line {node.lineno}: getLogger(__name__); use ctx.log or getLogger("elowen.plugin.{plugin}")')
            elif isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.split(".")[0] == "elowen":
                own = f"elowen.plugin.{plugin}"
                if arg.value != own and not arg.value.startswith(own + "."):
                    out.append(f"line {node.lineno}: getLogger({arg.value!r}); the plugin's logger is {own!r}")
        elif func in LEVELS and isinstance(node.func, ast.Attribute) and _is_logger(node.func.value) and node.args:
            first = node.args[1] if func == "log" and len(node.args) > 1 else node.args[0]
            head = _message_head(first)
            if head is not None:
                for prefix in PREFIXES:
                    if re.match(re.escape(prefix) + r"(\s+%[sdr])?:", head, re.IGNORECASE):
                        out.append(f"line {node.lineno}: message starts with {prefix + ':'!r}; the logger's name says which plugin")
                        break
    return out


def _modules() -> list[tuple[str, Path]]:
    return [(name, path) for name, folder in PLUGINS for path in sorted(folder.rglob("*.py"))]


def test_the_walk_sees_every_plugin() -> None:
    names = {n for n, _ in PLUGINS}
    assert {"tmux", "agents", "brain", "overseer", "overseer-relay", "overseer-parked", "deriver", "gemini", "webhook"} <= names


@pytest.mark.parametrize(("plugin", "path"), _modules(), ids=lambda v: str(v.relative_to(REPO)) if isinstance(v, Path) else v)
def test_plugin_logs_under_its_name(plugin: str, path: Path) -> None:
    assert problems(path.read_text(encoding="utf-8"), plugin) == []


def test_the_checks_can_fail() -> None:
    bad = (
        "import logging\n"
        "log = logging.getLogger(__name__)\n"
        "other = logging.getLogger('elowen.plugin.agents')\n"
        "fine = logging.getLogger('elowen.plugin.tmux.control')\n"
        "quiet = logging.getLogger('httpx')\n"
        "log.warning('tmux: control client exited (%s)', 1)\n"
        "self.ctx.log.info(f'overseer-relay: asked {n}')\n"
        "log.info('spawned %s', 'x')\n"
        "log.warning('tmux %s: reply with no pending command', label)\n"
        "log.info('task %s: spawned', 1)\n"
    )
    found = problems(bad, "tmux")
    assert [p.split(":")[0] for p in found] == ["line 2", "line 3", "line 6", "line 7", "line 9"], found
