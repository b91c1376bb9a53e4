"""The brain's file tools on hostile files: a FIFO in the project is refused at once (it used to
hang the daemon: the handler read it on the event loop), the handlers run off the event loop,
and a large file is read only up to the cap."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import trio

from elowen_builtins.brain.tools import files
from tests.support.model_server import Reply

from .conftest import brain_kernel, call


async def test_files_read_on_a_fifo_is_refused_and_the_loop_keeps_running(tmp_path: Path) -> None:
    async with brain_kernel(tmp_path) as env:
        os.mkfifo(env.project / "pipe")
        queue = env.script(Reply(tool_calls=[call("files.read", path="pipe")]), Reply(text="ok"))
        conv = env.conversation(user=env.admin)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await trio.sleep(0.01)

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ticker)
                await env.service.turn(env.admin, conv["id"], "read the pipe")
                nursery.cancel_scope.cancel()
        out = queue.seen[1].tool_results[0].output
        assert "regular file" in out, out
        assert ticks > 0


async def test_file_handlers_run_in_a_worker_thread(tmp_path: Path) -> None:
    seen: list[bool] = []

    def probe() -> str:
        seen.append(threading.current_thread() is threading.main_thread())
        return "x"

    await files._off_loop(probe)()
    assert seen == [False]
    handlers = {t.name: t.handler for t in files.tools()}
    for name in ("files.read", "files.write", "files.edit", "files.list"):
        assert getattr(handlers[name], "__wrapped__", None) is not None, name


async def test_files_read_is_capped(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(files, "MAX_READ_BYTES", 1000)
    async with brain_kernel(tmp_path) as env:
        (env.project / "big.txt").write_text("é" * 5000)  # 10 000 bytes
        queue = env.script(Reply(tool_calls=[call("files.read", path="big.txt")]), Reply(text="ok"))
        conv = env.conversation(user=env.admin)
        await env.service.turn(env.admin, conv["id"], "read it")
        out = queue.seen[1].tool_results[0].output
        assert '"truncated": true' in out and out.count("é") == 500, out[:200]
