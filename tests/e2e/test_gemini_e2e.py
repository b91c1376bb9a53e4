"""End to end: a fifth coding-agent CLI added by a third party, with the REAL program.

``contrib/elowen-gemini`` (the provider of Gemini CLI 0.61.0, installed by
``scripts/install-test-deps``) goes through what a user does with a plugin from PyPI, against a
running daemon (a real subprocess) and the real web process:

* ``elowen plugin install <folder>`` (the real command; pip's own ``PIP_TARGET`` puts the
  distribution in a private folder on the daemon's ``PYTHONPATH``, so this environment is not
  changed) finds the new plugin without a restart; before it, ``gemini`` specs are unknown (422);
* its settings are set (``PATCH /plugins/gemini/config``) and ``elowen plugin enable gemini``
  enables it live: ``GET /executors`` lists it, the web's Providers page (settings) and the
  kanban's executor picker show it;
* a task with exec ``gemini:fake-model`` runs the real CLI in tmux against the scripted model
  server (Gemini API wire protocol): the provider pre-seeds the folder trust (no trust dialog, no
  auto-trust decision), chooses the session id up front (its transcript exists afterwards), the
  CLI's permission prompt for the shell command becomes a pending decision, approving it sends
  the provider's key, the command — ``elowen close …`` with the agent's token — runs and the
  task closes with its evidence; the janitor ends the session;
* disabling the plugin live makes ``gemini`` specs unavailable (422 ``executor_unavailable``);
* a killed agent is relaunched with ``--resume`` and the id chosen for its first attempt;
* without pre-seeding, the trust dialog is accepted by the deriver (``elowen:auto-trust``).

Skipped only when Gemini CLI is not installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w

from tests.support.agent_env import MissingCliError, cli_binary, prepare_agent
from tests.support.daemon import launch_daemon
from tests.support.model_server import DefaultScript, ModelServer
from tests.support.waiting import free_port
from tests.support.waiting import wait as _wait

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "contrib" / "elowen-gemini"
ELOWEN = Path(sys.executable).parent / "elowen"
STEP = 90.0  # seconds per waited-for step (Gemini CLI starts in ~3-5 s on a 2-core machine)
FAST = {"scheduler_interval": 1.0, "sweep_interval": 1.0, "liveness_interval": 0.5, "stuck_interval": 0.5, "janitor_interval": 0.5}


def wait(predicate: Callable[[], Any], what: str, timeout: float = STEP, on_fail: Callable[[], str] | None = None) -> Any:
    return _wait(predicate, what, timeout, on_fail, interval=0.25)


@dataclass
class Stack:
    home: Path
    repo: Path
    agent_home: Path
    site: Path
    url: str
    port: int
    socket: str
    model: ModelServer
    daemon: subprocess.Popen[bytes]
    web: subprocess.Popen[bytes] | None = None
    web_url: str = ""

    @property
    def token(self) -> str:
        return (self.home / "admin.token").read_text().strip()

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=15.0)

    def get(self, path: str, **params: Any) -> Any:
        with self.api() as c:
            r = c.get(path, params=params)
            r.raise_for_status()
            return r.json()

    def send(self, method: str, path: str, body: Any) -> httpx.Response:
        with self.api() as c:
            return c.request(method, path, json=body)

    def elowen(self, *args: str, env: dict[str, str] | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """The real ``elowen`` console script against this daemon."""
        base = {k: v for k, v in os.environ.items() if not k.startswith(("ELOWEN_", "PIP_"))}
        base.update(ELOWEN_HOME=str(self.home), ELOWEN_HOST="127.0.0.1", ELOWEN_PORT=str(self.port))
        return subprocess.run([str(ELOWEN), *args], env={**base, **(env or {})}, capture_output=True, text=True, timeout=timeout)

    def executors(self) -> dict[str, dict[str, Any]]:
        return {e["name"]: e for e in self.get("/executors")["items"]}

    def screen(self) -> str:
        names = subprocess.run(["tmux", "-L", self.socket, "list-sessions", "-F", "#{session_name}"], capture_output=True, text=True).stdout.split()
        out = []
        for n in names:
            cap = subprocess.run(["tmux", "-L", self.socket, "capture-pane", "-p", "-t", f"={n}:"], capture_output=True, text=True).stdout
            out.append(f"--- {n}\n{cap}")
        log = self.home / "logs" / "daemon.log"
        tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
        return "\n".join(out) + "\n--- daemon log tail\n" + tail


@pytest.fixture
def preseed() -> bool:
    """The agents plugin's ``preseed_trust`` (a test parametrizes it to ``False``)."""
    return True


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, preseed: bool) -> Iterator[Stack]:
    try:
        cli_binary("gemini")
    except MissingCliError as exc:
        pytest.skip(f"Gemini CLI is not installed: {exc}")
    agent_home, repo, home, site = (tmp_path / n for n in ("agent-home", "repo", "elowen", "site"))
    for p in (agent_home, repo, home, site):
        p.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    port, sock = free_port(), f"elowen-test-{uuid.uuid4().hex[:10]}"
    settings = {"plugins": {"tmux": {"config": {"socket": sock}}, "agents": {"config": {"url": f"http://127.0.0.1:{port}", "preseed_trust": preseed, **FAST}}}}
    (home / "config.toml").write_text(tomli_w.dumps(settings))
    # the daemon imports third-party plugins from the private site folder (empty at start)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p))
    with ModelServer() as model:
        proc, url = launch_daemon(home, port, tmp_path / "daemon-stderr.txt")
        s = Stack(home, repo, agent_home, site, url, port, sock, model, proc)
        try:
            yield s
        finally:
            for p in (s.web, s.daemon):
                if p is not None and p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                    try:
                        p.wait(20)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()
            end_tmux(sock)


def end_tmux(sock: str) -> None:
    """Kill the private tmux server, then TERM what is left of its panes' process groups:
    Gemini CLI 0.61.0 waiting at a permission prompt survives the hang-up of its terminal (its
    relaunched child keeps running with no tty), so ``kill-server`` alone can leave it behind."""
    panes = subprocess.run(["tmux", "-L", sock, "list-panes", "-a", "-F", "#{pane_pid}"], capture_output=True, text=True).stdout.split()
    subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, check=False)
    for pid in (int(p) for p in panes if p.isdigit()):
        try:
            os.killpg(pid, signal.SIGTERM)  # the pane's program leads its own process group
        except ProcessLookupError:
            pass


def install(s: Stack, tmp: Path) -> subprocess.CompletedProcess[str]:
    """``elowen plugin install`` of a copy of the contrib folder (so the source tree gets no
    build/ or egg-info); pip installs into the private site folder, without dependencies
    (``elowen-sdk`` is already there)."""
    src = tmp / "elowen-gemini"
    shutil.copytree(DIST, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests"))
    return s.elowen("plugin", "install", str(src), env={"PIP_TARGET": str(s.site), "PIP_NO_DEPS": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}, timeout=300)


def start_web(s: Stack, tmp: Path) -> httpx.Client:
    """The real web process, logged in with the admin token (a session cookie)."""
    port = free_port()
    env = {**os.environ, "ELOWEN_HOME": str(s.home), "ELOWEN_URL": s.url, "ELOWEN_WEB_PORT": str(port)}
    with open(tmp / "web.out", "ab") as out:
        s.web = subprocess.Popen([sys.executable, "-m", "elowen.web"], env=env, stdout=out, stderr=subprocess.STDOUT)
    s.web_url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert s.web is not None and s.web.poll() is None, (tmp / "web.out").read_text(errors="replace")
        try:
            return httpx.get(s.web_url + "/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait(up, "the web process", timeout=30)
    client = httpx.Client(base_url=s.web_url, timeout=15.0, follow_redirects=True)
    r = client.post("/login", data={"token": s.token}, headers={"Origin": s.web_url})
    assert r.status_code == 200 and "/login" not in str(r.url), r.text[:500]
    return client


def enable_gemini(s: Stack, tmp: Path) -> dict[str, Any]:
    """Install, configure and enable the plugin (checked in detail by the first test); returns
    a new project on the scratch repository."""
    assert install(s, tmp).returncode == 0
    launch = prepare_agent("gemini", s.agent_home, s.repo, s.model.url, trust=False)
    assert s.send("PATCH", "/plugins/gemini/config", {"values": {"binary": launch.argv[0], "env": launch.env}}).status_code == 200
    assert s.elowen("plugin", "enable", "gemini").returncode == 0
    return dict(s.send("POST", "/projects", {"name": f"p-{uuid.uuid4().hex[:6]}", "path": str(s.repo)}).json())


def events(s: Stack, type_: str) -> list[dict[str, Any]]:
    import apsw

    conn = apsw.Connection(str(s.home / "elowen.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [json.loads(r[0]) for r in conn.execute("SELECT data FROM events WHERE type = ? ORDER BY id", (type_,))]
    finally:
        conn.close()


def close_command(marker: str) -> str:
    return f'RUN: echo {marker} > proof.txt && elowen close $ELOWEN_TASK --summary "wrote proof.txt" --evidence "proof.txt contains {marker}"'


def test_gemini_cli_installed_enabled_listed_and_runs_a_task(stack: Stack, tmp_path: Path) -> None:
    s = stack
    started = time.monotonic()
    project = s.send("POST", "/projects", {"name": f"p-{uuid.uuid4().hex[:6]}", "path": str(s.repo)}).json()

    # ---- before: no such executor
    assert "gemini" not in s.executors()
    unknown = s.send("POST", "/tasks", {"title": "too early", "project_id": project["id"], "exec": "gemini:fake-model"})
    assert unknown.status_code == 422 and "unknown_executor" in unknown.text and "gemini" in unknown.text, unknown.text
    daemon_pid = s.daemon.pid

    # ---- install while the daemon runs
    proc = install(s, tmp_path)
    installed_at = time.monotonic()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^new plugin: gemini 0\.1\.0 \(\w+\); enable it with `elowen plugin enable gemini`$", proc.stdout, re.M), proc.stdout
    assert list(s.site.glob("elowen_gemini-0.1.0.dist-info")) and (s.site / "elowen_gemini" / "patterns.toml").is_file()
    plugins = {p["name"]: p for p in s.get("/plugins")["items"]}
    assert plugins["gemini"]["state"] != "enabled" and plugins["gemini"]["source"] == "elowen-gemini"

    # ---- configure (binary and the offline environment of the real CLI) and enable live
    launch = prepare_agent("gemini", s.agent_home, s.repo, s.model.url, trust=False)
    configured = s.send("PATCH", "/plugins/gemini/config", {"values": {"binary": launch.argv[0], "env": launch.env}})
    assert configured.status_code == 200, configured.text
    enabled = s.elowen("plugin", "enable", "gemini")
    assert enabled.returncode == 0 and enabled.stdout.strip() == "gemini: enabled", enabled.stdout + enabled.stderr
    assert s.daemon.pid == daemon_pid and s.daemon.poll() is None, "no restart"

    # ---- listed by the registry, the Providers page and the executor picker
    entry = s.executors()["gemini"]
    assert (entry["plugin"], entry["display_name"], entry["kind"], entry["enabled"]) == ("gemini", "Gemini CLI", "cli", True)
    assert "gemini" in entry["examples"] and "gemini:gemini-2.5-pro" in entry["examples"]
    web = start_web(s, tmp_path)
    try:
        settings = web.get("/settings")
        assert settings.status_code == 200
        assert 'data-executor="gemini"' in settings.text and "Gemini CLI: exec <code>gemini</code>" in settings.text
        assert 'id="cfg-gemini"' in settings.text  # its config form among the Providers
        kanban = web.get("/kanban")
        assert kanban.status_code == 200 and '<option value="gemini">gemini</option>' in kanban.text
    finally:
        web.close()

    # ---- a task on the real CLI: trust pre-seeded, permission prompt approved, closed by the agent
    marker = f"ok-{uuid.uuid4().hex[:6]}"
    created = s.send(
        "POST",
        "/tasks",
        {
            "title": "gemini e2e",
            "project_id": project["id"],
            "exec": "gemini:fake-model",
            "description": f"Write the proof file, then close the task. {close_command(marker)}",
        },
    )
    assert created.status_code < 300, created.text
    task_id = int(created.json()["id"])
    created_at = time.monotonic()

    def pending() -> Any:
        items = s.get("/decisions", task=task_id, status="pending")["items"]
        return items[0] if items else None

    decision = wait(pending, "the permission prompt as a pending decision", on_fail=s.screen)
    prompt_at = time.monotonic()
    assert decision["kind"] == "prompt", decision
    request = decision["payload"]["request"]
    assert request["tool"] == "Shell" and "elowen close" in (request["command"] or ""), decision
    assert not (s.repo / "proof.txt").exists()
    trusted = json.loads((s.agent_home / ".gemini" / "trustedFolders.json").read_text())
    assert trusted[str(s.repo.resolve())] == "TRUST_FOLDER"  # written by the provider, not by the test
    assert [d["id"] for d in s.get("/decisions", task=task_id)["items"]] == [decision["id"]], "no trust dialog came up"

    session = s.get("/sessions", task=task_id)["items"][0]
    assert session["provider"] == "gemini" and re.fullmatch(r"[0-9a-f-]{36}", session["cli_session_id"] or ""), session

    decided = s.send("POST", f"/decisions/{decision['id']}", {"action": "approve"})
    assert decided.status_code == 200 and decided.json()["status"] == "approved", decided.text
    assert decided.json()["answer"]["keys"] == ["1"]  # the provider's approve key, from its patterns.toml

    def closed() -> Any:
        task = s.get(f"/tasks/{task_id}")
        return task if task["state"] == "closed" else None

    task = wait(closed, "the task closed by its agent", on_fail=s.screen)
    closed_at = time.monotonic()
    assert task["summary"] == "wrote proof.txt" and task["evidence"] == [f"proof.txt contains {marker}"]
    assert (s.repo / "proof.txt").read_text().strip() == marker
    gemini_requests = [r for r in s.model.requests if r.api == "gemini" and r.has_tools]
    # the CLI spoke the Gemini API to the scripted model (the tool result may not reach it: the
    # janitor ends the agent as soon as its task is closed)
    assert gemini_requests and all(r.model == "fake-model" and "run_shell_command" in r.tool_names for r in gemini_requests)
    assert gemini_requests[0].prompt.rstrip().endswith(close_command(marker))
    transcripts = list((s.agent_home / ".gemini" / "tmp").glob(f"*/chats/session-*-{session['cli_session_id'][:8]}.jsonl"))
    assert transcripts, "the session id chosen up front names the CLI's transcript"
    wait(lambda: all(x["state"] != "running" for x in s.get("/sessions", task=task_id)["items"]), "the session ended", on_fail=s.screen)

    # ---- disabled live: its specs are unavailable, with the plugin to enable named
    disabled = s.elowen("plugin", "disable", "gemini")
    assert disabled.returncode == 0 and disabled.stdout.strip() == "gemini: disabled", disabled.stdout + disabled.stderr
    assert s.executors()["gemini"]["enabled"] is False
    refused = s.send("POST", "/tasks", {"title": "after", "project_id": project["id"], "exec": "gemini:fake-model"})
    assert refused.status_code == 422 and "executor_unavailable" in refused.text and "gemini" in refused.text, refused.text
    print(
        f"\ngemini e2e: install {installed_at - started:.1f} s, task created→prompt decision {prompt_at - created_at:.1f} s, "
        f"approve→closed {closed_at - prompt_at:.1f} s, total {time.monotonic() - started:.1f} s"
    )


def test_gemini_killed_agent_is_resumed_with_its_session(stack: Stack, tmp_path: Path) -> None:
    s = stack
    project = enable_gemini(s, tmp_path)
    created = s.send(
        "POST",
        "/tasks",
        {"title": "resume", "project_id": project["id"], "exec": "gemini:fake-model", "description": "Start the work. RUN: echo started > started.txt"},
    )
    task_id = int(created.json()["id"])

    def pending() -> Any:
        items = s.get("/decisions", task=task_id, status="pending")["items"]
        return items[0] if items else None

    first = wait(pending, "the first attempt's permission prompt", on_fail=s.screen)
    a1 = s.get(f"/sessions/elowen-t{task_id}-a1")
    sid = a1["cli_session_id"]
    assert a1["state"] == "running" and a1["pid"] and re.fullmatch(r"[0-9a-f-]{36}", sid or ""), a1
    os.kill(a1["pid"], signal.SIGKILL)  # the CLI dies (its relaunched child goes with the pane)

    def second_attempt() -> Any:
        with s.api() as c:
            r = c.get(f"/sessions/elowen-t{task_id}-a2")
        return r.json() if r.status_code == 200 else None

    a2 = wait(second_attempt, "the relaunch", on_fail=s.screen)
    assert a2["cli_session_id"] == sid, "resumed with the session id chosen for the first attempt"
    again = wait(lambda: (lambda d: d if d and d["id"] != first["id"] else None)(pending()), "the resumed agent's prompt", on_fail=s.screen)
    assert again["session"] == f"elowen-t{task_id}-a2" and "started.txt" in json.dumps(again["payload"]["request"])
    spawned = [e for e in events(s, "agent.spawned") if e["task_id"] == task_id]
    assert [(e["attempt"], e["resumed"]) for e in spawned] == [(1, False), (2, True)], spawned
    assert "Attempt 1" in s.get(f"/tasks/{task_id}")["resume_note"]
    # the resumed CLI sent the earlier conversation to the model again
    carried = [r for r in s.model.requests if r.api == "gemini" and json.dumps(r.body).count(f"Elowen task #{task_id}") >= 2]
    assert carried, "no request carried the earlier conversation"


@pytest.mark.parametrize("preseed", [False])
def test_gemini_trust_dialog_is_accepted_when_not_preseeded(stack: Stack, tmp_path: Path) -> None:
    """Without pre-seeding, 0.61.0 shows its trust dialog and already sends the prompt: the model
    answers slowly here, so the dialog is alone on the screen and the deriver accepts it
    (``elowen:auto-trust``); Gemini CLI writes the trust itself, restarts and runs the prompt
    again, whose permission prompt becomes the decision. (When the model is fast, the tool
    confirmation is drawn above the dialog and nothing is answered: see the provider's tests.)"""
    s = stack
    s.model.script = DefaultScript(slow_delay=6.0)
    project = enable_gemini(s, tmp_path)
    created = s.send(
        "POST",
        "/tasks",
        {"title": "trust", "project_id": project["id"], "exec": "gemini:fake-model", "description": "Start. SLOW RUN: echo trusted > trusted.txt"},
    )
    task_id = int(created.json()["id"])

    def pending() -> Any:
        items = s.get("/decisions", task=task_id, status="pending", kind="prompt")["items"]
        return items[0] if items else None

    decision = wait(pending, "the permission prompt after the trust dialog", on_fail=s.screen)
    auto = [d for d in s.get("/decisions", task=task_id)["items"] if d["decided_by"] == "elowen:auto-trust"]
    assert len(auto) == 1 and "Do you trust the files in this folder?" in json.dumps(auto[0]["payload"]), auto
    trusted = json.loads((s.agent_home / ".gemini" / "trustedFolders.json").read_text())
    assert trusted == {str(s.repo.resolve()): "TRUST_FOLDER"}  # written by Gemini CLI on "1. Trust folder"
    assert s.send("POST", f"/decisions/{decision['id']}", {"action": "approve"}).status_code == 200
    wait(lambda: (s.repo / "trusted.txt").is_file(), "the approved command to run", on_fail=s.screen)
