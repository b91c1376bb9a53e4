"""``ctx.service(Contract)`` is typed as the contract for mypy (and a name gives ``Any``): mypy
run on a consumer's code, as a plugin author's CI would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONSUMER = """
from elowen_sdk import PluginContext
from elowen_sdk.services import TmuxService

def use(ctx: PluginContext) -> TmuxService:
    reveal_type(ctx.service(TmuxService))
    reveal_type(ctx.service("tmux"))
    tmux = ctx.service(TmuxService)
    tmux.no_such_member
    return tmux
"""


@pytest.mark.slow
def test_service_lookup_by_contract_is_typed(tmp_path: Path) -> None:
    (tmp_path / "consumer.py").write_text(CONSUMER)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"), "consumer.py"],
        cwd=tmp_path,
        env={"MYPYPATH": str(ROOT / "plugin_sdk"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout
    assert 'Revealed type is "elowen_sdk.services.tmux.TmuxService"' in out, out
    assert 'Revealed type is "Any"' in out, out
    assert '"TmuxService" has no attribute "no_such_member"' in out, out
    assert "type-abstract" not in out, "a protocol class must be accepted as the argument"
    assert out.count("error:") == 1, out
