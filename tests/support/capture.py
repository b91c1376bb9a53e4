"""Drive a REAL coding-agent CLI in tmux against the scripted model server and save its screens.

This is how the fixtures under ``tests/fixtures/screens/<cli>/captured/`` (numbers 30 and up)
were made; see ``tests/fixtures/screens/CAPTURED.md``. It is a tool, not a test::

    .venv/bin/python -m tests.support.capture --list
    .venv/bin/python -m tests.support.capture claude-notebook claude-mcp --size 80x24

Each scene runs in a fresh world ``/tmp/elowen-cap/<cli>-<world>/`` (``work/repo`` is the cwd, a
git repository with a README; ``home`` the fake HOME) and its own tmux server (``tmux -S
<world>/tmux.sock -f /dev/null``, ``focus-events on``, ``remain-on-exit on``), so the paths on
screen are real and nothing is rewritten afterwards. ``NN_<state>_<WxH>_<what>.txt`` is
``capture-pane -p``; ``….ansi.txt`` is ``capture-pane -p -e`` taken right after it, kept only
when both show the same text (else both are taken again).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elowen_builtins.agents.screen import classify
from elowen_sdk.screen import strip_ansi
from tests.support.agent_env import AgentLaunch, Cli, cli_version, prepare_agent
from tests.support.model_server import ModelServer, ParsedRequest, Reply, ToolCall

ROOT = Path("/tmp/elowen-cap")
SCREENS = Path(__file__).resolve().parents[1] / "fixtures" / "screens"


def world(cli: str, name: str) -> tuple[Path, Path]:
    """A fresh ``(repo, home)`` under ``/tmp/elowen-cap/<cli>-<name>/`` (removed first)."""
    base = ROOT / f"{cli}-{name}"
    for _ in range(10):  # a CLI of the previous run may still be writing its state
        shutil.rmtree(base, ignore_errors=True)
        if not base.exists():
            break
        time.sleep(1)
    home, repo = base / "home", base / "work" / "repo"
    home.mkdir(parents=True)
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README.md").write_text("demo\n")
    return repo, home


def one_call(tool: str, args: Mapping[str, Any], *, delay: float = 0.0, final: str = "FAKE: done.") -> Callable[[ParsedRequest], Reply]:
    """A model script: the first reply to the prompt is one call of ``tool``; after its result,
    ``final``; a request without tools (a title) gets a title."""
    return calls([ToolCall(tool, dict(args))], delay=delay, final=final)


def calls(steps: Sequence[ToolCall], *, delay: float = 0.0, final: str = "FAKE: done.") -> Callable[[ParsedRequest], Reply]:
    """A model script: the i-th reply after the prompt (i = tool results seen since it) is the
    call ``steps[i]``; then ``final``. Every reply to a tool-bearing request waits ``delay`` s."""

    def script(req: ParsedRequest) -> Reply:
        if not req.has_tools:
            return Reply(text="Fake session title")
        step = len(req.tool_results)
        if step < len(steps):
            return Reply(text="FAKE: I will use a tool.", tool_calls=(steps[step],), delay=delay)
        return Reply(text=final, delay=delay)

    return script


@dataclass
class Pane:
    """One CLI running in its own tmux server."""

    cli: Cli
    launch: AgentLaunch
    sock: Path
    server: ModelServer
    size: tuple[int, int]
    target: str = "cap"
    saved: list[Path] = field(default_factory=list)

    @property
    def tmux(self) -> list[str]:
        return ["tmux", "-S", str(self.sock)]

    def capture(self, escapes: bool = False) -> str:
        args = [*self.tmux, "capture-pane", "-p", *(["-e"] if escapes else []), "-t", self.target]
        return subprocess.run(args, capture_output=True, text=True).stdout

    def state(self) -> str:
        return classify(self.cli, self.capture()).state

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", self.target, *keys], check=True)

    def text(self, text: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", self.target, "-l", text], check=True)

    def wait(self, pred: Callable[[str], bool], timeout: float = 90, settle: float = 1.5, what: str = "") -> str:
        """Wait until ``pred(screen)``; then let the frame finish drawing for ``settle`` s."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.capture()
            if pred(screen):
                time.sleep(settle)
                return self.capture()
            if time.monotonic() > deadline:
                tools = [r.tool_names for r in self.server.requests if r.has_tools][-1:]
                raise TimeoutError(f"{self.cli}: never saw {what or pred} (tools offered: {tools}):\n{screen}")
            time.sleep(0.3)

    def wait_text(self, marker: str, timeout: float = 90, settle: float = 1.5) -> str:
        return self.wait(lambda s: marker in s, timeout, settle, what=repr(marker))

    def wait_idle(self, timeout: float = 150) -> str:
        return self.wait(lambda s: classify(self.cli, s).state == "idle", timeout, 1.0, what="idle")

    def submit(self, prompt: str, *, hear: bool = True) -> None:
        """Type ``prompt`` on the idle composer and press Enter until the model server hears it
        (under load OpenCode and Kilo drop keys typed before their composer takes input)."""
        self.wait_idle()
        for _ in range(5):
            self.text(prompt)
            if self._shows(prompt[:40], 6.0):
                break
        time.sleep(0.5)
        self.keys("Enter")
        if not hear:
            return
        presses, deadline = 1, time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                self.server.wait_for(lambda r: r.has_tools and prompt in r.prompt, timeout=3)
                return
            except TimeoutError:
                pass
            if presses < 3 and prompt[:40] in self.capture() and self.state() == "idle":
                self.keys("Enter")
                presses += 1
        raise TimeoutError(f"{self.cli} never sent the prompt:\n{self.capture()}")

    def _shows(self, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.capture():
                return True
            time.sleep(0.3)
        return False

    def save(self, number: int, state: str | None, what: str = "") -> Path:
        """Save the screen as ``NN_<state>_<WxH>[_what]`` (plain and ``-e``) in the fixtures;
        ``state=None``: named by what it classifies as now (to be checked by eye, and renamed
        to the true state when the classifier is wrong)."""
        w, h = self.size
        if state is None:
            state = "SEEN-" + classify(self.cli, self.capture()).state
        name = f"{number:02d}_{state}_{w}x{h}" + (f"_{what}" if what else "")
        folder = SCREENS / self.cli / "captured"
        for _ in range(10):
            plain, ansi = self.capture(), self.capture(escapes=True)
            if _same(plain, strip_ansi(ansi)):
                break
            time.sleep(0.4)
        else:
            raise RuntimeError(f"{self.cli}: the screen kept changing; not saved")
        (folder / f"{name}.txt").write_text(plain)
        (folder / f"{name}.ansi.txt").write_text(ansi)
        got = classify(self.cli, plain, escapes=ansi).state
        print(f"saved {self.cli}/captured/{name}  (classifies {got})", flush=True)
        self.saved.append(folder / f"{name}.txt")
        return folder / f"{name}.txt"


def _same(plain: str, stripped: str) -> bool:
    def norm(s: str) -> list[str]:
        lines = [ln.rstrip() for ln in s.split("\n")]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    return norm(plain) == norm(stripped)


class Session:
    """Start ``cli`` in a world, yield a :class:`Pane`, stop everything (by pid) on exit."""

    def __init__(
        self,
        cli: Cli,
        world_name: str,
        script: Callable[[ParsedRequest], Reply],
        *,
        size: tuple[int, int] = (200, 50),
        trust: bool = True,
        extra_args: Sequence[str] = (),
        extra_env: Mapping[str, str] | None = None,
        setup: Callable[[AgentLaunch], None] | None = None,
    ) -> None:
        self.cli, self.size = cli, size
        self.repo, self.home = world(cli, world_name)
        self.server = ModelServer(script=script)
        self.sock = self.repo.parents[1] / "tmux.sock"
        self.trust, self.extra_args, self.extra_env, self.setup = trust, extra_args, extra_env, setup

    def __enter__(self) -> Pane:
        self.server.start()
        launch = prepare_agent(self.cli, self.home, self.repo, self.server.url, trust=self.trust, extra_args=self.extra_args, extra_env=self.extra_env)
        if self.setup:
            self.setup(launch)
        envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in launch.env.items())
        cmd = f"cd {shlex.quote(str(self.repo))} && exec env -i {envs} {' '.join(map(shlex.quote, launch.argv))}"
        tmux = ["tmux", "-S", str(self.sock), "-f", "/dev/null"]
        env = {k: v for k, v in os.environ.items() if k != "TMUX"}
        w, h = self.size
        # the options are set before the CLI starts: a server with only a placeholder session
        subprocess.run([*tmux, "new-session", "-d", "-x", str(w), "-y", str(h), "-s", "boot", "sleep 600"], check=True, env=env)
        subprocess.run([*tmux, "set-option", "-g", "focus-events", "on"], check=True, env=env)
        subprocess.run([*tmux, "set-option", "-g", "remain-on-exit", "on"], check=True, env=env)
        subprocess.run([*tmux, "new-session", "-d", "-x", str(w), "-y", str(h), "-s", "cap", cmd], check=True, env=env)
        subprocess.run([*tmux, "kill-session", "-t", "boot"], check=True, env=env)
        self.pane = Pane(self.cli, launch, self.sock, self.server, self.size)
        return self.pane

    def __exit__(self, *exc: object) -> None:
        tmux = ["tmux", "-S", str(self.sock)]
        pid = subprocess.run([*tmux, "display", "-p", "-t", "cap", "#{pane_pid}"], capture_output=True, text=True).stdout.strip()
        if pid.isdigit():
            _stop_group(int(pid))
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        self.server.stop()


def _stop_group(pgid: int) -> None:
    """SIGTERM the CLI's process group (some CLIs outlive kill-server at a prompt), then
    SIGKILL what is left after 5 s."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


def edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Load the JSON file at ``path``, let ``change`` edit it in place, write it back."""
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n")


# ------------------------------------------------------------------------------------ scenes

SCENES: dict[str, Callable[[tuple[int, int]], None]] = {}


def scene(name: str) -> Callable[[Callable[[tuple[int, int]], None]], Callable[[tuple[int, int]], None]]:
    def register(fn: Callable[[tuple[int, int]], None]) -> Callable[[tuple[int, int]], None]:
        SCENES[name] = fn
        return fn

    return register


def main(argv: Sequence[str] | None = None) -> int:
    # run as ``-m`` this module is ``__main__``: the scenes register in the importable copy
    from tests.support import capture_scenes  # noqa: F401 - registers the scenes
    from tests.support.capture import SCENES

    p = argparse.ArgumentParser(prog="python -m tests.support.capture", description=__doc__.split("\n")[0])
    p.add_argument("scenes", nargs="*")
    p.add_argument("--size", action="append", help="WxH (repeatable; default: the scene's own)")
    p.add_argument("--list", action="store_true")
    a = p.parse_args(argv)
    if a.list or not a.scenes:
        for name, fn in SCENES.items():
            print(f"{name:32} {(fn.__doc__ or '').strip().splitlines()[0] if fn.__doc__ else ''}")
        return 0
    sizes = [tuple(int(v) for v in s.split("x")) for s in (a.size or ["200x50"])]
    failed = 0
    for name in a.scenes:
        for size in sizes:
            print(f"== {name} {size[0]}x{size[1]} ({cli_version(name.split('-')[0])})", flush=True)  # type: ignore[arg-type]
            try:
                SCENES[name](size)  # type: ignore[arg-type]
            except Exception as exc:  # a tool: report and go on with the next scene
                failed += 1
                print(f"FAILED {name}: {exc}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
