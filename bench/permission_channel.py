"""Benchmark: permission prompt → decision latency of the REAL Claude Code 2.1.197, through the
structured channel (its ``PermissionRequest`` hook posting to ``POST /agent/permission``) and
through screen reading, in one run of one daemon.

A daemon subprocess (tmux, bubblewrap, the overseer at L2 with the relay; the scripted model
server plays Claude's model and approves as the relay's model) runs tasks on Claude Code. Each
task's model asks for ``--commands`` shell commands one after the other. Phase 1 runs with the
channel on (the default), phase 2 after ``permission_channel = false`` is set on the
``claude-code`` plugin (live reconfiguration), so the same prompts go through the screen.

Per prompt, on this process's clock (the model server runs here):

* ``created``: the model's tool call served → the decision created (``payload.detected_at``:
  the request's arrival for the channel, the deriver's detection for the screen);
* ``decided``: decision created → decided (the overseer: rules, then the relay's model);
* ``delivered``: decided → the CLI's next request carrying the tool's result (the verdict
  reached the CLI — keys or the hook's reply — and the command ran);
* ``applied``: the tool call served → that next request: the whole round trip.

Usage: ``python bench/permission_channel.py [--tasks 2] [--commands 4] [--json]``
(needs ``scripts/install-test-deps``).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e._overseer_daemon import Daemon, start, wait  # noqa: E402
from tests.e2e.test_permission_channel_e2e import ChannelScript, prompts, task  # noqa: E402
from tests.support.model_server import ModelServer  # noqa: E402


def _run_phase(d: Daemon, model: ModelServer, mission: int, label: str, tasks: int, commands: int, offset: float) -> list[dict[str, Any]]:
    samples: list[dict[str, Any]] = []
    for _ in range(tasks):
        tag = f"{label}-{uuid.uuid4().hex[:6]}"
        cmds = [f"echo {tag}-{i} > {tag}-{i}.txt" for i in range(commands)]
        task_id = task(d, mission, "Write the files. " + " ".join(f"RUN: {c}" for c in cmds))
        wait(lambda last=d.repo / f"{tag}-{commands - 1}.txt": last.exists(), f"{label}: the last command ran", timeout=180, on_fail=d.screen)
        wait(
            lambda t=task_id: len([p for p in prompts(d, t) if p["status"] == "approved"]) >= commands,
            f"{label}: {commands} approved decisions",
            on_fail=d.screen,
        )
        decisions = {p["payload"]["request"]["command"]: p for p in prompts(d, task_id) if p["payload"].get("request")}
        d.post(f"/tasks/{task_id}/cancel", {})  # frees its agent slot (max_agents)
        reqs = model.requests
        for cmd in cmds:
            call_at = _tool_call_served(reqs, cmd)
            result_at = _tool_result_seen(reqs, cmd)
            dec = decisions.get(cmd)
            if call_at is None or result_at is None or dec is None:
                continue
            via = "channel" if dec["payload"].get("channel") else "screen"
            samples.append(
                {
                    "phase": label,
                    "via": via,
                    "created_ms": (float(dec["payload"]["detected_at"]) - offset - call_at) * 1000,
                    "decided_ms": (_epoch(dec["decided_at"]) - float(dec["payload"]["detected_at"])) * 1000,
                    "delivered_ms": (result_at - (_epoch(dec["decided_at"]) - offset)) * 1000,
                    "applied_ms": (result_at - call_at) * 1000,
                    "keys": bool((dec.get("answer") or {}).get("keys")),
                }
            )
    return samples


def _epoch(iso: str) -> float:
    """``2026-12-02T05:00:00.123Z`` → seconds since the epoch."""
    return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def _tool_call_served(reqs: list[Any], cmd: str) -> float | None:
    """When the model server answered with the Bash call of ``cmd`` (the request whose reply
    it was: the first one where the prompt names ``cmd`` and the results so far stop before it)."""
    for r in reqs:
        if not r.has_tools or f"RUN: {cmd}" not in r.prompt:
            continue
        if _commands(r.prompt)[len(r.tool_results) : len(r.tool_results) + 1] == [cmd]:
            return float(r.received_at)
    return None


def _tool_result_seen(reqs: list[Any], cmd: str) -> float | None:
    """When the CLI sent the result of ``cmd``'s call back (the next request of that task)."""
    for r in reqs:
        if not r.has_tools or f"RUN: {cmd}" not in r.prompt:
            continue
        cmds = _commands(r.prompt)
        if cmd in cmds and len(r.tool_results) > cmds.index(cmd):
            return float(r.received_at)
    return None


def _commands(prompt: str) -> list[str]:
    return [m.strip() for m in re.findall(r"RUN:\s*(.+?)(?=\s+RUN:|\s+CLOSE\b|$)", prompt, re.MULTILINE)]


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    values = sorted(values)
    return {
        "n": len(values),
        "median": round(statistics.median(values), 1),
        "p90": round(values[min(len(values) - 1, int(0.9 * len(values)))], 1),
        "max": round(values[-1], 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--tasks", type=int, default=2, help="tasks per phase")
    ap.add_argument("--commands", type=int, default=4, help="permission prompts per task")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="elowen-bench-channel-") as tmp, ModelServer(ChannelScript()) as model:
        offset = time.time() - time.monotonic()  # model-server times are monotonic, decisions' epoch
        d = start(Path(tmp), model, {}, cli="claude")
        try:
            mission = int(d.mission(2)["id"])
            samples = _run_phase(d, model, mission, "channel", args.tasks, args.commands, offset)
            d.patch("/plugins/claude-code/config", {"values": {"permission_channel": False}})
            wait(lambda: d.get("/plugins/claude-code")["state"] == "enabled", "claude-code reconfigured", timeout=30)
            samples += _run_phase(d, model, mission, "screen", args.tasks, args.commands, offset)
        finally:
            d.stop()
    report: dict[str, Any] = {}
    for via in ("channel", "screen"):
        rows = [s for s in samples if s["via"] == via]
        report[via] = {
            "created_ms": _stats([s["created_ms"] for s in rows]),
            "decided_ms": _stats([s["decided_ms"] for s in rows]),
            "delivered_ms": _stats([s["delivered_ms"] for s in rows]),
            "applied_ms": _stats([s["applied_ms"] for s in rows]),
            "answered_with_keys": sum(s["keys"] for s in rows),
        }
    report["misrouted"] = [s for s in samples if s["phase"] != s["via"]]
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for via in ("channel", "screen"):
        r = report[via]
        print(f"{via:8s} created   {r['created_ms']}")
        print(f"{'':8s} decided   {r['decided_ms']}")
        print(f"{'':8s} delivered {r['delivered_ms']}")
        print(f"{'':8s} applied   {r['applied_ms']}  (answered with keys: {r['answered_with_keys']})")
    print(f"prompts that went the other way than their phase: {len(report['misrouted'])}")


if __name__ == "__main__":
    main()
