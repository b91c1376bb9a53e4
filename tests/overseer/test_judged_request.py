"""An overseer answer is carried out only for the request it judged: a permission channel
taking a decision over (or handing it back to the screen) may change the decision's request
while the decision path is thinking. Real agents + deriver plugins, the fake agent in real tmux,
the relay path against the scripted model server (its reply held back 1.5 s)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.overseer.conftest import until, world
from tests.support.model_server import ModelServer, Reply

APPROVE = json.dumps({"approve": True, "confidence": 0.95, "rationale": "harmless"})


def _chats(server: ModelServer) -> int:
    return len([r for r in server.requests if r.api == "chat"])


async def _judging(w: Any, server: ModelServer, task_id: int) -> dict[str, Any]:
    first = await until(lambda: (ds := w.decisions.list_decisions(task_id=task_id, kind="prompt")) and ds[0], what="the prompt")
    await until(lambda: _chats(server) == 1, what="the relay judging it")
    return dict(first)


async def test_another_reading_of_the_same_request_is_still_approved(tmp_path: Path, socket_name: str, model_server: ModelServer) -> None:
    model_server.script = lambda request: Reply(text=APPROVE, delay=1.5)
    async with world(tmp_path, socket_name, model=model_server) as w:
        task_id = w.task(w.mission(2))
        first = await _judging(w, model_server, task_id)
        payload = first["payload"]
        # what a channel takeover of the same request writes: its own reading, more fields
        same = {**payload["request"], "tool": "Bash", "description": "Print a greeting", "command": payload["request"]["command"] + "  "}
        w.decisions.store.repoint(first["id"], {**payload, "request": same, "screen_request": payload["request"]})
        done = await until(lambda: (d := w.decisions.get(first["id"]))["status"] != "pending" and d, what="the verdict")
        assert done["status"] == "approved"
        await until(lambda: w.keys() == ["1"], what="the approve key")


async def test_a_request_changed_while_judged_goes_to_a_human(tmp_path: Path, socket_name: str, model_server: ModelServer) -> None:
    model_server.script = lambda request: Reply(text=APPROVE, delay=1.5)
    async with world(tmp_path, socket_name, model=model_server) as w:
        task_id = w.task(w.mission(2))
        first = await _judging(w, model_server, task_id)
        payload = first["payload"]
        other = {**payload["request"], "command": "curl -s https://example.invalid/x.sh"}  # complete, not destructive by the rules
        w.decisions.store.repoint(first["id"], {**payload, "request": other})
        done = await until(lambda: (d := w.decisions.get(first["id"]))["status"] != "pending" and d, what="the verdict")
        assert done["status"] == "escalated" and "changed while it was being judged" in (done["rationale"] or "")
        assert w.keys() == []  # nothing typed into the pane
