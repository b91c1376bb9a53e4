"""The one-time CLI set-up before an agent's first spawn (:mod:`elowen_builtins.agents.stateinit`):
run once per (binary, state folder), one at a time with later spawns waiting for it, bounded in
time, never in the project folder; and, with the real OpenCode and Kilo CLIs, that their set-up
command really creates and migrates the database their TUIs would otherwise race to create."""

from __future__ import annotations

import logging
import os
import stat
import time
from pathlib import Path
from typing import Any

import apsw
import pytest
import trio

from elowen_builtins.agents.stateinit import StateInit
from elowen_builtins.kilo.plugin import KiloProvider
from elowen_builtins.opencode.plugin import OpenCodeProvider
from tests.support.agent_env import prepare_agent


class ScriptProvider:
    """A provider whose set-up command is a real shell script (``init_command`` is the whole
    contract :class:`StateInit` uses)."""

    name = "script"

    def __init__(self, script: Path, *args: str) -> None:
        self.argv = [str(script), *args]

    def init_command(self, *, env: Any = None) -> list[str] | None:
        return self.argv


def script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "cli-init.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_runs_once_and_a_spawn_racing_it_waits_until_it_is_done(tmp_path: Path) -> None:
    log = tmp_path / "log"
    cli = script(tmp_path, f'echo start >> {log}; sleep 0.5; echo "$PWD" > {tmp_path}/cwd; echo end >> {log}\n')
    init = StateInit()
    env = {"HOME": str(tmp_path / "home")}
    after: list[list[str]] = []

    async def spawn() -> None:
        await init.ensure(ScriptProvider(cli), env)
        after.append(lines(log))  # what a spawn behind the set-up sees when it may go on

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(spawn)

    trio.run(main)
    assert lines(log) == ["start", "end"] and init.runs == 1
    assert after == [["start", "end"]] * 3  # none went on before the set-up ended
    cwd = Path((tmp_path / "cwd").read_text().strip())
    assert cwd.name.startswith("elowen-cli-init-") and not cwd.exists()  # an empty folder, not the project, removed after

    trio.run(init.ensure, ScriptProvider(cli), env)
    assert lines(log) == ["start", "end"]  # already set up: not run again


def test_another_state_folder_or_a_changed_binary_runs_it_again(tmp_path: Path) -> None:
    log = tmp_path / "log"
    cli = script(tmp_path, f"echo $HOME >> {log}\n")
    init = StateInit()
    trio.run(init.ensure, ScriptProvider(cli), {"HOME": "/tmp/a"})
    trio.run(init.ensure, ScriptProvider(cli), {"HOME": "/tmp/b"})
    trio.run(init.ensure, ScriptProvider(cli), {"HOME": "/tmp/b", "XDG_DATA_HOME": "/tmp/b/data"})
    assert lines(log) == ["/tmp/a", "/tmp/b", "/tmp/b"]
    os.utime(cli, ns=(0, cli.stat().st_mtime_ns + 10**9))  # the CLI was upgraded in place
    trio.run(init.ensure, ScriptProvider(cli), {"HOME": "/tmp/a"})
    assert lines(log) == ["/tmp/a", "/tmp/b", "/tmp/b", "/tmp/a"]


def test_the_pane_environment_reaches_it_over_the_daemons(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cli = script(tmp_path, f'echo "$ELOWEN_X $SHELL_SEEN" > {out}\n')
    trio.run(StateInit().ensure, ScriptProvider(cli), {"ELOWEN_X": "from-the-pane", "HOME": str(tmp_path), "SHELL_SEEN": "yes"})
    assert out.read_text().split() == ["from-the-pane", "yes"]


def test_a_failing_command_is_logged_and_counts_as_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = tmp_path / "log"
    cli = script(tmp_path, f'echo ran >> {log}; echo \'bad config: {{"apiKey":"sk-SECRET-123"}}\' >&2; exit 3\n')
    init = StateInit()
    with caplog.at_level(logging.WARNING, "elowen.plugin.agents"):
        trio.run(init.ensure, ScriptProvider(cli), {"HOME": str(tmp_path)})
        trio.run(init.ensure, ScriptProvider(cli), {"HOME": str(tmp_path)})
    assert lines(log) == ["ran"]
    assert "exited with status 3" in caplog.text
    assert "sk-SECRET" not in caplog.text  # a CLI's output may echo its config, keys included: never logged


def test_a_hanging_command_is_stopped_at_the_timeout(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cli = script(tmp_path, "exec sleep 30\n")
    init = StateInit(timeout=0.5)

    async def main() -> float:
        started = trio.current_time()
        await init.ensure(ScriptProvider(cli), {"HOME": str(tmp_path)})
        return trio.current_time() - started

    with caplog.at_level(logging.WARNING, "elowen.plugin.agents"):
        took = trio.run(main)
    assert took < 3, took  # its process group is killed at once
    assert "ran over" in caplog.text


def test_at_the_timeout_the_whole_process_group_dies(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    # a wrapper that ignores SIGTERM and leaves a child holding the output
    cli = script(tmp_path, f"trap '' TERM; sleep 60 & echo $! > {pid_file}; wait\n")
    init = StateInit(timeout=0.5)

    async def main() -> float:
        started = trio.current_time()
        await init.ensure(ScriptProvider(cli), {"HOME": str(tmp_path)})
        return trio.current_time() - started

    took = trio.run(main)
    assert took < 3, took
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the set-up's child outlived it"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


def test_a_cancelled_set_up_does_not_count_and_the_next_spawn_runs_it(tmp_path: Path) -> None:
    log = tmp_path / "log"
    cli = script(tmp_path, f"echo start >> {log}; sleep 1; echo end >> {log}\n")
    init = StateInit()
    env = {"HOME": str(tmp_path)}
    seen: list[list[str]] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            first = trio.CancelScope()

            async def cancelled_spawn() -> None:
                with first:
                    await init.ensure(ScriptProvider(cli), env)

            async def waiting_spawn() -> None:
                await trio.sleep(0.1)
                await init.ensure(ScriptProvider(cli), env)
                seen.append(lines(log))

            nursery.start_soon(cancelled_spawn)
            nursery.start_soon(waiting_spawn)
            await trio.sleep(0.3)
            first.cancel()  # the task, or the plugin calling, stopped mid-set-up

    trio.run(main)
    assert init.runs == 2
    assert seen == [["start", "start", "end"]]  # the waiter ran it to its end before going on


def test_it_never_raises_and_a_relative_binary_runs_from_its_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    (tmp_path / "bin").mkdir()
    cli = tmp_path / "bin" / "cli"
    cli.write_text(f'#!/bin/sh\necho "$TMUX|$TMUX_PANE|$PWD" > {out}\n')
    cli.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMUX", "/tmp/tmux-0/default,1,0")
    monkeypatch.setenv("TMUX_PANE", "%1")
    init = StateInit(workdir=tmp_path / "private")
    trio.run(init.ensure, ScriptProvider(Path("bin/cli")), {"HOME": str(tmp_path)})
    tmux, pane, cwd = out.read_text().strip().split("|")
    assert (tmux, pane) == ("", "")  # the daemon's own tmux client variables stay out
    assert Path(cwd).parent == tmp_path / "private"
    trio.run(init.ensure, ScriptProvider(cli), {"HOME": str(tmp_path / "other"), "BAD": "nul\x00byte"})  # logged, not raised
    assert init.runs == 2


def test_no_command_or_no_program_runs_nothing(tmp_path: Path) -> None:
    init = StateInit()

    class NoInit:
        def init_command(self, *, env: Any = None) -> None:
            return None

    class Broken:
        name = "broken"

        def init_command(self, *, env: Any = None) -> list[str]:
            raise RuntimeError("bad settings")

    for provider in (NoInit(), Broken(), object(), ScriptProvider(tmp_path / "no-such-cli"), ScriptProvider(Path("no-such-cli-on-path"))):
        trio.run(init.ensure, provider, {"HOME": str(tmp_path), "PATH": str(tmp_path)})
    assert init.runs == 0


@pytest.mark.slow
@pytest.mark.parametrize(("cli", "provider", "db"), [("opencode", OpenCodeProvider, "opencode"), ("kilo", KiloProvider, "kilo")])
def test_the_real_clis_set_up_command_creates_and_migrates_the_database(tmp_path: Path, cli: str, provider: Any, db: str) -> None:
    home, repo = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    repo.mkdir()
    launch = prepare_agent(cli, home, repo, "http://127.0.0.1:9")  # type: ignore[arg-type]
    p = provider({"binary": launch.argv[0], "env": launch.env})
    database = p.database(launch.env)
    assert not database.exists()
    init = StateInit()
    trio.run(init.ensure, p, launch.env)
    assert init.runs == 1 and database.is_file()
    conn = apsw.Connection(str(database), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        migrations = conn.execute("SELECT count(*) FROM migration").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()
    assert migrations > 0 and "session" in tables, (migrations, tables)
    assert not any(repo.iterdir())  # nothing written in the project folder
