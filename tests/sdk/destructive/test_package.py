"""The ``elowen_sdk.destructive`` package itself: its public modules, its shipped rule file, its
module sizes, and that it stands alone (no plugin, no kernel)."""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from elowen_sdk import ElowenError, destructive
from elowen_sdk.destructive import inline_code, shell

PACKAGE = Path(destructive.__file__).parent
SDK_PYPROJECT = PACKAGE.parents[1] / "pyproject.toml"


def test_public_modules_export_sorted_existing_names() -> None:
    for module in (destructive, shell, inline_code):
        assert module.__all__ == sorted(module.__all__), module.__name__
        assert all(hasattr(module, name) for name in module.__all__), module.__name__
    assert {"parse", "ParseError", "Word", "Simple", "Script"} <= set(shell.__all__)


def test_parse_error_is_an_elowen_error_and_a_value_error() -> None:
    assert issubclass(shell.ParseError, ElowenError) and issubclass(shell.ParseError, ValueError)


def test_the_rule_file_is_package_data() -> None:
    assert destructive.RULES_PATH == PACKAGE / "rules.toml" and destructive.RULES_PATH.is_file()
    package_data = tomllib.loads(SDK_PYPROJECT.read_text())["tool"]["setuptools"]["package-data"]
    patterns = package_data.get("elowen_sdk.destructive", [])
    assert any(fnmatch.fnmatch("rules.toml", p) for p in patterns), package_data


def test_every_module_is_under_600_lines() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.glob("*.py")}
    assert len(sizes) >= 10
    assert {name: n for name, n in sizes.items() if n >= 600} == {}


def test_it_imports_no_plugin_and_no_kernel() -> None:
    code = (
        "import sys, elowen_sdk.destructive as d; d.check_command('rm -rf /x', cwd='/srv');"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('elowen', 'elowen_builtins', 'trio')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ.copy())
    assert out.stdout.strip() == "[]"
