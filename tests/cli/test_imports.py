"""The CLI's start-up stays light: importing it (and running ``--help``) pulls in none of the
daemon's heavy dependencies."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("trio", "quart", "hypercorn", "httpx", "pydantic", "mcp", "anyio", "elowen.core", "elowen.daemon")

PROBE = """
import json, sys
import elowen.cli.main as m
from elowen.cli import client, config, daemonctl, events, output, plugins, projects, services, tasks, users
try:
    m.cli.main(["--help"], prog_name="elowen", standalone_mode=False)
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def test_cli_imports_no_heavy_module() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stderr.strip().splitlines()[-1]))
    assert "click" in loaded and "http.client" in loaded  # the probe did import the CLI
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert heavy == [], f"heavy modules imported by the CLI: {heavy}"
