"""Soak rows for hostile plugin code and a full disk (run by ``bench/soak.py``).

Fault-injecting plugins are installed for real: a package folder per plugin (its
``elowen-plugin.toml`` beside it) and a ``wedge_soak-1.0.dist-info`` with their entry points,
put on the daemon's ``PYTHONPATH`` so ``importlib.metadata`` discovers them like any
distribution from PyPI. The full disk is a 20 MiB tmpfs mounted as the daemon's home.
"""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx

from elowen.core.store import Store

# name → (hooks it declares, the module's source)
FAULTS: dict[str, tuple[list[str], str]] = {
    "soak-raiser": (["on_event"], "def on_event(ctx, event):\n    raise RuntimeError('boom')\n"),
    "soak-hanger": (["on_event"], "import trio\nasync def on_event(ctx, event):\n    await trio.sleep_forever()\n"),
    "soak-exiter": (["on_event"], "async def on_event(ctx, event):\n    raise SystemExit(3)\n"),
    "soak-blocker": (["on_load"], "import time\ndef on_load(ctx):\n    time.sleep(3600)\n"),
    "soak-sync-slow": (["on_event"], "import time\ndef on_event(ctx, event):\n    time.sleep(0.5)\n"),
    "soak-bad-return": (
        ["turn_context"],
        "class Evil:\n    def __repr__(self):\n        raise RuntimeError('no repr')\ndef turn_context(ctx, turn):\n    return Evil()\n",
    ),
}


def install_faulty_plugins(root: Path) -> dict[str, str]:
    """Write the fault plugins under ``root``; returns the env to run a daemon that finds them."""
    pkg = root / "wedge_soak"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    eps = ["[elowen.plugins]"]
    for name, (hooks, source) in FAULTS.items():
        mod = name.replace("-", "_")
        folder = pkg / mod
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").write_text("from elowen_sdk import hookimpl\n" + _mark(source))
        (folder / "elowen-plugin.toml").write_text(
            textwrap.dedent(
                f"""\
                name = "{name}"
                version = "1.0.0"
                api = "1"
                entry = "wedge_soak.{mod}"
                description = "A plugin that misbehaves on purpose (soak)."

                [capabilities]
                required = []
                optional = []

                [contributes]
                hooks = {hooks!r}
                """
            ).replace("'", '"')
        )
        eps.append(f"{name} = wedge_soak.{mod}")
    info = root / "wedge_soak-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: wedge-soak\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("\n".join(eps) + "\n")
    (info / "top_level.txt").write_text("wedge_soak\n")
    return {"PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def _mark(source: str) -> str:
    """Decorate each top-level hook function of ``source`` with ``@hookimpl``."""
    out = []
    for line in source.splitlines():
        if line.startswith(("def ", "async def ")):
            out.append("@hookimpl")
        out.append(line)
    return "\n".join(out) + "\n"


def faulty_plugins(tmp: Path, proc: Any) -> dict[str, object]:
    """Enable the six fault plugins, then create 200 tasks (each event reaches their hooks):
    every write acknowledged and kept, ``/health`` answering, the daemon stops in bounds."""
    env = install_faulty_plugins(tmp / "site")
    d = proc(tmp / "faults", env=env, plugins=True)
    (tmp / "proj-faults").mkdir(exist_ok=True)
    states: dict[str, str] = {}
    acked: list[int] = []
    health: list[float] = []
    with d.client() as c:
        c.timeout = httpx.Timeout(30)
        for name in FAULTS:
            r = c.post(f"/plugins/{name}/enable")
            states[name] = r.json().get("state", str(r.status_code)) if r.headers.get("content-type", "").startswith("application/json") else str(r.status_code)
        pid = c.post("/projects", json={"name": "p", "path": str(tmp / "proj-faults")}).json()["id"]
        for i in range(200):
            r = c.post("/tasks", json={"title": f"fault {i}", "project_id": pid})
            if r.status_code == 201:
                acked.append(r.json()["id"])
            if i % 10 == 0:
                t0 = time.monotonic()
                c.get("/health")
                health.append(time.monotonic() - t0)
        after = {p["name"]: p["state"] for p in c.get("/plugins").json()["items"] if p["name"] in FAULTS}
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    code = d.proc.wait(30)
    stop_s = time.monotonic() - t0
    store = Store(tmp / "faults" / "elowen.db")
    try:
        kept = {int(r["id"]) for r in store.query("SELECT id FROM tasks")}
        ok = store.integrity_check()
    finally:
        store.close()
    health.sort()
    return {
        "experiment": f"{len(FAULTS)} fault-injecting plugins",
        "acknowledged": len(acked),
        "lost": len(set(acked) - kept),
        "integrity": ok,
        "/health median ms": round(health[len(health) // 2] * 1000, 1),
        "/health max ms": round(health[-1] * 1000, 1),
        "states": ",".join(f"{n.removeprefix('soak-')}={after.get(n, states[n])}" for n in FAULTS),
        "stop s": round(stop_s, 2),
        "exit": code,
    }


def full_disk(tmp: Path, proc: Any) -> dict[str, object]:
    """A 20 MiB tmpfs home filled by large tasks: writes end in 507 ``disk_full``, ``/health``
    keeps answering, every acknowledged task is kept, and a small write fits afterwards (the
    disk reserve was released). Needs root for ``mount``."""
    home = tmp / "full"
    home.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(home)], capture_output=True).returncode != 0:
        return {"experiment": "full disk (20 MiB tmpfs)", "skipped": "needs root to mount a tmpfs"}
    (tmp / "proj-full").mkdir(exist_ok=True)
    try:
        d = proc(home)
        acked: list[int] = []
        codes: dict[int, int] = {}
        with d.client() as c:
            pid = c.post("/projects", json={"name": "p", "path": str(tmp / "proj-full")}).json()["id"]
            for i in range(400):
                r = c.post("/tasks", json={"title": f"full {i}", "project_id": pid, "description": "z" * 60_000})
                codes[r.status_code] = codes.get(r.status_code, 0) + 1
                if r.status_code == 201:
                    acked.append(r.json()["id"])
                elif r.status_code == 507:
                    break
            health = c.get("/health").status_code
            # the 4 MiB reserve was released on the first full-disk error: a small write fits
            after = c.post("/tasks", json={"title": "after", "project_id": pid}).status_code
        d.proc.send_signal(signal.SIGTERM)
        d.proc.wait(30)
        store = Store(home / "elowen.db")
        try:
            kept = {int(r["id"]) for r in store.query("SELECT id FROM tasks")}
            ok = store.integrity_check()
        finally:
            store.close()
        return {
            "experiment": "full disk (20 MiB tmpfs)",
            "acknowledged": len(acked),
            "lost": len(set(acked) - kept),
            "integrity": ok,
            "answers": ",".join(f"{k}x{v}" for k, v in sorted(codes.items())),
            "/health when full": health,
            "small write after": after,
        }
    finally:
        subprocess.run(["umount", "-l", str(home)], capture_output=True)
