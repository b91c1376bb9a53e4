"""A real daemon subprocess for the overseer's end-to-end tests: OpenCode 1.18.33 (installed by
``scripts/install-test-deps``) as the agents' CLI, the scripted model server playing the
agents' model, the overseer's relay model and (parked path) the overseer CLI's model."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import tomli_w

from tests.support.agent_env import prepare_agent
from tests.support.daemon import launch_daemon
from tests.support.model_server import DefaultScript, ModelServer, ParsedRequest, Reply, shell_tool_call
from tests.support.waiting import free_port
from tests.support.waiting import wait as _wait

STEP = 90.0
ROOT = Path(__file__).resolve().parents[2]


def wait(predicate: Callable[[], Any], what: str, timeout: float = STEP, on_fail: Callable[[], str] | None = None) -> Any:
    return _wait(predicate, what, timeout, on_fail, interval=0.25)


@dataclass
class OverseerScript:
    """The model: the relay path gets ``verdict`` (per decision kind, JSON), the parked
    overseer CLI polls and decides (``parked_confidence``; a decision whose request mentions
    HOLD is polled and left undecided), everything else is :class:`DefaultScript`."""

    verdict: dict[str, dict[str, Any]] = field(default_factory=lambda: {"prompt": {"approve": True, "confidence": 0.9, "rationale": "harmless"}})
    parked_confidence: float = 0.9
    default: DefaultScript = field(default_factory=DefaultScript)

    def __call__(self, request: ParsedRequest) -> Reply:
        messages = request.body.get("messages") or []
        system = str(messages[0].get("content")) if messages else ""
        if request.json_schema is not None and "You are the overseer of Elowen" in system:
            kind = str(request.body.get("response_format", {}).get("json_schema", {}).get("name", "")).removeprefix("overseer_")
            answer = self.verdict.get(kind) or {"approve": True, "confidence": 0.95, "rationale": "fine", "note": ""}
            return Reply(text=json.dumps(answer))
        if request.has_tools and "You are the Elowen overseer of mission" in json.dumps(request.body):
            return self._parked(request)
        return self.default(request)

    def _parked(self, request: ParsedRequest) -> Reply:
        last = request.all_tool_results[-1].output if request.all_tool_results else ""
        if '"kind"' in last:
            if "HOLD" in last:
                return Reply(text="FAKE: I am thinking about this one.")
            found = re.search(r'"id":\s*(\d+)', last)
            assert found, last
            cmd = f'elowen overseer decide --id {found.group(1)} --approve --confidence {self.parked_confidence} --rationale "looks safe"'
            return Reply(text="FAKE: deciding.", tool_calls=(shell_tool_call(request, cmd),))
        return Reply(text="FAKE: polling.", tool_calls=(shell_tool_call(request, "elowen overseer poll"),))


@dataclass
class Daemon:
    home: Path
    repo: Path
    proc: subprocess.Popen[bytes]
    url: str
    token: str
    socket: str
    model: ModelServer
    project: int = 0

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30.0)

    def get(self, path: str, **params: Any) -> Any:
        with self.api() as c:
            r = c.get(path, params=params)
            assert r.status_code < 300, r.text
            return r.json()

    def post(self, path: str, body: Any) -> Any:
        with self.api() as c:
            r = c.post(path, json=body)
            assert r.status_code < 300, r.text
            return r.json()

    def patch(self, path: str, body: Any) -> Any:
        with self.api() as c:
            r = c.patch(path, json=body)
            assert r.status_code < 300, r.text
            return r.json()

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "ELOWEN_URL": self.url, "ELOWEN_TOKEN": self.token, "ELOWEN_HOME": str(self.home), "ELOWEN_NO_AUTOSTART": "1"}
        return subprocess.run([str(Path(sys.executable).parent / "elowen"), *args], env=env, capture_output=True, text=True, timeout=timeout)

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=False)

    def screen(self) -> str:
        out = []
        for n in self.tmux("list-sessions", "-F", "#{session_name}").stdout.split():
            if n.startswith("elowen-"):
                out.append(f"--- {n}\n{self.tmux('capture-pane', '-p', '-t', f'={n}:').stdout}")
        for what, path in (("decisions", "/decisions"), ("overseer agents", "/overseer/agents")):
            try:
                out.append(f"--- {what}\n" + "\n".join(json.dumps(i, default=str)[:400] for i in self.get(path)["items"]))
            except Exception as exc:  # diagnostics only: never hide the real failure
                out.append(f"--- {what}: {exc!r}")
        opencode_log = self.home.parent / "agent-home" / ".local" / "share" / "opencode" / "log" / "opencode.log"
        if opencode_log.exists():
            out.append("--- opencode log tail\n" + opencode_log.read_text(errors="replace")[-3000:])
        log = self.home / "logs" / "daemon.log"
        return "\n".join(out) + "\n--- daemon log tail\n" + (log.read_text(errors="replace")[-5000:] if log.exists() else "")

    def mission(self, level: int, **extra: Any) -> dict[str, Any]:
        return self.post("/missions", {"name": f"m-{uuid.uuid4().hex[:6]}", "level": f"L{level}", "project_id": self.project, "engage": True, **extra})

    def task(self, mission_id: int | None, description: str, title: str = "e2e task") -> int:
        body = {"title": title, "project_id": self.project, "exec": "opencode:fake/fake-model", "description": description}
        if mission_id is not None:
            body["labels"] = [f"mission:{mission_id}"]  # in the mission before any scheduler tick
        task_id = int(self.post("/tasks", body)["id"])
        if mission_id is not None:
            self.post(f"/missions/{mission_id}/tasks", {"task_ids": [task_id]})
        return task_id

    def decision(self, task_id: int, status: str | tuple[str, ...], kind: str = "prompt") -> dict[str, Any]:
        wanted = (status,) if isinstance(status, str) else status

        def find() -> Any:
            items = [d for d in self.get("/decisions", task=task_id, kind=kind)["items"] if d["status"] in wanted]
            return items[0] if items else None

        return wait(find, f"a {kind} decision of task {task_id} in {wanted}", on_fail=self.screen)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.tmux("kill-server")


PLUGIN = {"claude": "claude-code", "codex": "codex", "opencode": "opencode", "kilo": "kilo"}


def start(
    tmp_path: Path,
    model: ModelServer,
    overseer: dict[str, Any] | None = None,
    *,
    cli: str = "opencode",
    overseer_cli: str | None = None,
    sandbox: bool = True,
    provider: dict[str, Any] | None = None,
) -> Daemon:
    """A daemon whose tasks run on ``cli`` (OpenCode by default); ``overseer_cli`` (another CLI)
    is configured too, for a parked overseer running on it (``sandbox``: as root, Claude gets
    ``IS_SANDBOX=1``); ``provider``: more settings of ``cli``'s plugin (e.g. ``mcp = false``)."""
    fake_home, repo, home = tmp_path / "agent-home", tmp_path / "repo", tmp_path / "elowen"
    for p in (fake_home, repo, home):
        p.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    launch = prepare_agent(cli, fake_home, repo, model.url)  # type: ignore[arg-type]
    port = free_port()
    sock = f"elowen-test-{uuid.uuid4().hex[:10]}"
    ov = {"sweep_interval": 1.0, **(overseer or {})}
    parked = {"liveness_interval": 0.5, **{k: ov.pop(k) for k in ("overseer_exec", "overseer_silence", "max_overseer_restarts") if k in ov}}
    settings = {
        "inference": {"providers": {"fake": {"kind": "openai", "base_url": model.url + "/v1", "max_retries": 0}}},
        "plugins": {
            "tmux": {"config": {"socket": sock}},
            "agents": {
                "config": {
                    "url": f"http://127.0.0.1:{port}",
                    "scheduler_interval": 1.0,
                    "sweep_interval": 1.0,
                    "liveness_interval": 0.5,
                    "stuck_interval": 0.5,
                    "janitor_interval": 0.5,
                }
            },
            PLUGIN[cli]: {"config": {"binary": launch.argv[0], "env": launch.env, **(provider or {})}},
            "overseer": {"config": ov},
            "overseer-relay": {"config": {"model": "fake/fake-model"}},
            "overseer-parked": {"config": parked},
        },
    }
    if overseer_cli is not None and overseer_cli != cli:
        other = prepare_agent(overseer_cli, fake_home, repo, model.url)  # type: ignore[arg-type]
        env = dict(other.env)
        if overseer_cli == "claude" and os.geteuid() == 0 and sandbox:
            env["IS_SANDBOX"] = "1"  # this test machine is a sandbox VM; see docs/agents.md, "Claude Code as root"
        settings["plugins"][PLUGIN[overseer_cli]] = {"config": {"binary": other.argv[0], "env": env}}
    (home / "config.toml").write_text(tomli_w.dumps(settings))
    proc, url = launch_daemon(home, port, tmp_path / "daemon-stderr.txt")
    token = (home / "admin.token").read_text().strip()
    d = Daemon(home, repo, proc, url, token, sock, model)
    wait(lambda: d.get("/plugins/agents")["state"] == "enabled" and d.get("/plugins/overseer")["state"] == "enabled", "agents and overseer enabled", timeout=15)
    d.project = int(d.post("/projects", {"name": f"p-{uuid.uuid4().hex[:6]}", "path": str(repo)})["id"])
    return d
