"""docs/plugins.md's "Writing a decision path" example is the test plugin in
tests/overseer/allowlist_path/ (whose test runs it): the manifest block is its manifest file,
and the Python block's code is in its plugin module."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = Path(__file__).parent / "allowlist_path"


def _section() -> str:
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    return text.split("## Writing a decision path", 1)[1].split("\n## ", 1)[0]


def test_the_manifest_snippet_is_the_plugins_manifest() -> None:
    [toml] = re.findall(r"```toml\n(.*?)```", _section(), re.S)
    assert toml == (PLUGIN / "elowen-plugin.toml").read_text(encoding="utf-8")
    assert "[config.programs]" in toml and "[config.priority]" in toml


def test_the_code_snippet_is_the_plugins_code() -> None:
    [code] = re.findall(r"```python\n(.*?)```", _section(), re.S)
    module = (PLUGIN / "plugin.py").read_text(encoding="utf-8")
    body = code.split("@hookimpl", 1)[1]
    assert body.strip() in module.replace("def register_decision_paths(ctx: Any, register: Any) -> None:", "def register_decision_paths(ctx, register):")
