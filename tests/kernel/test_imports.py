"""Plugins meet only through the SDK: no builtin plugin imports another builtin plugin's
package, nor the kernel's or the hosts' internals (``elowen.core``, ``elowen.daemon``,
``elowen.web``, ``elowen.cli``).

The walk reads every module of ``builtin_plugins`` with :mod:`ast`, so imports inside
functions (the usual way around load order) and relative imports that climb out of a plugin
are found too. It also refuses ``ctx.service("<name>")`` for a service that has a contract: ask
``ctx.service(TheContract)``, which is typed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import elowen_sdk.services  # noqa: F401  (registers every builtin contract)
from elowen_sdk.contracts import contracts

ROOT = Path(__file__).resolve().parents[2] / "builtin_plugins"
PACKAGE = "elowen_builtins"
FORBIDDEN = ("elowen.core", "elowen.daemon", "elowen.web", "elowen.cli")

# Files that still break the rule while their plugins are being reworked; each entry must go
# once its file is fixed (an entry whose file is clean fails the test, so the list only shrinks).
KNOWN_OFFENDERS: frozenset[str] = frozenset()


def _plugins() -> list[str]:
    return sorted(p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file())


def _module_parts(path: Path) -> list[str]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(tree: ast.AST, path: Path) -> list[tuple[int, str]]:
    """``(line, absolute module name)`` of every import in ``tree``."""
    here = [PACKAGE, *_module_parts(path)]
    package = here if path.name == "__init__.py" else here[:-1]
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            out.append((node.lineno, module))
            out += [(node.lineno, f"{module}.{alias.name}") for alias in node.names if module in ("elowen", PACKAGE)]
    return out


def violations(path: Path) -> list[str]:
    """What is wrong with the imports of one module file (empty: nothing)."""
    own = _module_parts(path)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    problems: list[str] = []
    for line, module in _imported(tree, path):
        if any(module == f or module.startswith(f + ".") for f in FORBIDDEN):
            problems.append(f"line {line}: imports {module} (kernel/host internals; use elowen_sdk)")
        parts = module.split(".")
        if parts[0] == PACKAGE and len(parts) > 1 and parts[1] != own:
            problems.append(f"line {line}: imports {module} (another plugin's package; use its service contract)")
    return problems


def _files() -> list[Path]:
    return sorted(p for plugin in _plugins() for p in (ROOT / plugin).rglob("*.py"))


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_plugin_module_imports_only_the_sdk_and_itself(path: Path) -> None:
    rel = str(path.relative_to(ROOT))
    problems = violations(path)
    if rel in KNOWN_OFFENDERS:
        if not problems:
            pytest.fail(f"{rel} is clean now: remove it from KNOWN_OFFENDERS")
        pytest.xfail(f"known offender: {problems}")
    assert problems == [], f"{rel}: " + "; ".join(problems)


def test_known_offenders_exist() -> None:
    missing = sorted(rel for rel in KNOWN_OFFENDERS | KNOWN_UNTYPED if not (ROOT / rel).is_file())
    assert missing == []


def test_the_walk_finds_each_kind_of_offence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "builtin_plugins"
    (root / "alpha" / "sub").mkdir(parents=True)
    (root / "beta").mkdir()
    for d in (root / "alpha", root / "alpha" / "sub", root / "beta"):
        (d / "__init__.py").write_text("")
    bad = root / "alpha" / "sub" / "mod.py"
    bad.write_text(
        "import elowen.daemon.auth\n"
        "from elowen.core.store import utc_iso\n"
        "from elowen import web\n"
        "def f():\n"
        "    from elowen_builtins.beta import thing\n"
        "    from ...beta import other\n"
        "from . import sibling\n"
        "from .. import cousin\n"
        "from elowen_builtins.alpha import ok\n"
        "from elowen_sdk import ElowenError\n"
        "import elowen.prompts\n"
    )
    monkeypatch.setattr(__import__(__name__, fromlist=["ROOT"]), "ROOT", root)
    problems = violations(bad)
    assert [p.split(":")[0] for p in problems] == ["line 1", "line 2", "line 3", "line 5", "line 6"]
    assert all("imports elowen_builtins.beta " in p for p in problems[3:])
    good = root / "beta" / "__init__.py"
    good.write_text("from .x import y\nfrom elowen_sdk.services import TmuxService\n")
    assert violations(good) == []


def untyped_lookups(path: Path) -> list[str]:
    """``.service("<name>")`` calls in one module for names that have a contract."""
    known = contracts()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "service"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in known
        ):
            name = node.args[0].value
            out.append(f"line {node.lineno}: service({name!r}) → service({known[name].__name__})")
    return out


# Files that still ask for a contracted service by its name (the agents and missions services
# of plugins being reworked); same rule as KNOWN_OFFENDERS: the list only shrinks.
KNOWN_UNTYPED: frozenset[str] = frozenset()


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_services_are_asked_for_by_contract(path: Path) -> None:
    rel = str(path.relative_to(ROOT))
    lookups = untyped_lookups(path)
    if rel in KNOWN_UNTYPED:
        if not lookups:
            pytest.fail(f"{rel} asks by contract now: remove it from KNOWN_UNTYPED")
        pytest.xfail(f"known untyped lookups: {lookups}")
    assert lookups == [], f"{rel}: " + "; ".join(lookups)


def test_the_lookup_check_can_fail(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text('def f(ctx):\n    ctx.service("tmux").kill("x")\n    ctx.service(TmuxService)\n    ctx.service("weather")\n')
    assert untyped_lookups(mod) == ["line 2: service('tmux') → service(TmuxService)"]
