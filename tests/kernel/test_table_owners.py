"""One owner per table: a builtin plugin's SQL names only the tables of its own ``schema.sql``.
The kernel's tables (``tasks``, ``projects``, ``users``, ``tokens``…) are reached through the
daemon's host services (``TasksService``, ``UsersService``), another plugin's tables through
that plugin's service.

The walk reads every module of ``builtin_plugins`` with :mod:`ast`, joins the literal parts of
each string (f-strings included), and looks for a table name after an upper-case ``FROM``,
``JOIN``, ``INTO``, ``UPDATE`` or ``TABLE``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "builtin_plugins"
KERNEL_SCHEMA = REPO / "kernel" / "core" / "schema.sql"

_CREATE = re.compile(r"CREATE\s+(?:VIRTUAL\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([A-Za-z_]\w*)", re.IGNORECASE)
_NAMED = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+([A-Za-z_]\w*)")

#: ``"<plugin folder>/<module>": {tables}`` still read by a plugin that does not own them, with
#: the reason. An entry that is no longer needed fails the test, so the list only shrinks.
KNOWN: dict[str, frozenset[str]] = {}


def tables_of(schema: str) -> set[str]:
    """The tables a ``schema.sql`` creates."""
    return {m.group(1) for m in _CREATE.finditer(schema)}


def _owners() -> dict[str, str]:
    """``table -> owner`` (``"kernel"`` or a plugin folder)."""
    owners = dict.fromkeys(tables_of(KERNEL_SCHEMA.read_text(encoding="utf-8")), "kernel")
    for schema in sorted(PLUGINS.glob("*/schema.sql")):
        for table in tables_of(schema.read_text(encoding="utf-8")):
            owners[table] = schema.parent.name
    return owners


OWNERS = _owners()


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            out.append((node.lineno, "".join(str(v.value) if isinstance(v, ast.Constant) else " {} " for v in node.values)))
    return out


def foreign_tables(source: str, own: str) -> dict[str, int]:
    """``table -> first line`` of every table the SQL strings of a module of plugin ``own``
    name that belongs to someone else."""
    found: dict[str, int] = {}
    for line, text in _strings(ast.parse(source)):
        for m in _NAMED.finditer(text):
            owner = OWNERS.get(m.group(1))
            if owner is not None and owner != own:
                found.setdefault(m.group(1), line)
    return found


def _modules() -> list[Path]:
    return sorted(p for p in PLUGINS.rglob("*.py") if p.relative_to(PLUGINS).parts[0] != "__init__.py")


def test_owners_are_known() -> None:
    assert OWNERS["tasks"] == OWNERS["users"] == "kernel"
    assert OWNERS["agent_sessions"] == OWNERS["decisions"] == "agents"
    assert OWNERS["missions"] == "overseer" and OWNERS["overseer_queue"] == "overseer_parked"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PLUGINS)))
def test_plugin_sql_names_only_its_own_tables(path: Path) -> None:
    rel = str(path.relative_to(PLUGINS))
    found = foreign_tables(path.read_text(encoding="utf-8"), path.relative_to(PLUGINS).parts[0])
    known = KNOWN.get(rel, frozenset())
    extra = {t: line for t, line in found.items() if t not in known}
    assert not extra, "SQL on tables the plugin does not own (ask the owner's service): " + ", ".join(
        f"{t} (owner {OWNERS[t]}, line {line})" for t, line in sorted(extra.items())
    )
    stale = sorted(known - set(found))
    assert not stale, f"{rel} no longer reads {stale}: remove them from KNOWN"


def test_the_walk_can_fail() -> None:
    source = (
        'Q = "SELECT p.path FROM tasks t JOIN projects p ON p.id = t.project_id"\n'
        'def f(c):\n    return f"UPDATE agent_sessions SET x = 1 WHERE {c}"\n'
        '"""Prose: read from tasks and projects (lower case, not SQL)."""\n'
        'OWN = "SELECT * FROM missions JOIN mission_tasks USING (id)"\n'
    )
    assert foreign_tables(source, "overseer") == {"tasks": 1, "projects": 1, "agent_sessions": 3}
    assert foreign_tables(source, "agents") == {"tasks": 1, "projects": 1, "missions": 5, "mission_tasks": 5}
