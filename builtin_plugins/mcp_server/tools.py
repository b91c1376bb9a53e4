"""The MCP server's tools: each one the REST call (or calls) it stands for.

Who sees which tools (``tools/list`` answers per caller; a call of a tool the caller does not
see is refused the same way as an unknown tool):

=============  ==========================================================================
audience       tools
=============  ==========================================================================
``agent``      an agent token (scope ``agent``, bound to one task): ``task_get``,
               ``progress``, ``ask``, ``close``, ``permission_prompt`` — always on its
               own task
``person``     a full token of a person: ``tasks_list``, ``task_get``, ``task_create``,
               ``task_cancel``, ``projects_list``, ``missions_list``, ``mission_set_level``,
               ``escalations_list``, ``escalation_answer``, ``ask``, ``brain_chat``
``overseer``   a mission's parked overseer principal (and admins): ``poll``, ``decide``
=============  ==========================================================================

What a caller may do with a tool it sees is decided by the REST route, with the caller's own
token: a member's ``mission_set_level`` on another member's mission is the route's 403
``not_owner``, returned as a tool error ``{"error": {"status", "code", "message"}}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

from elowen_sdk import Principal

from .daemon_api import DaemonApi, RestError

__all__ = ["ASK_POLL", "TOOLS", "Call", "ToolSpec", "find", "tools_for"]

ASK_POLL = 25.0
"""Seconds of one long-poll of ``GET /asks/{id}`` (the route allows 0–60)."""


@dataclass(frozen=True, slots=True)
class Call:
    """What a tool function gets: the API client, the caller's ``Authorization`` header and
    principal, the arguments and the plugin's time limits (seconds)."""

    api: DaemonApi
    authorization: str
    principal: Principal
    args: Mapping[str, Any]
    ask_timeout: float
    turn_timeout: float


Run = Callable[[Call], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One MCP tool: ``name``, one-line ``description``, JSON Schema ``schema`` of its
    arguments, the ``audiences`` that see it and ``run``."""

    name: str
    description: str
    schema: Mapping[str, Any]
    audiences: frozenset[str]
    run: Run


def _obj(props: Mapping[str, Any] | None = None, required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": dict(props or {}), "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


ID = {"type": "integer", "minimum": 1}
TEXT = {"type": "string", "minLength": 1}
LIMIT = {"type": "integer", "minimum": 1, "maximum": 200, "description": "at most this many items (default 50)"}
CURSOR = {"type": "string", "description": "next_cursor of the previous page"}


def _own_task(c: Call) -> int:
    """The task of an agent token; a person names it (``task_id``)."""
    if c.principal.scope == "agent":
        if c.principal.task_id is None:
            raise RestError(403, "agent_scope", "this agent token is bound to no task")
        return c.principal.task_id
    task_id = c.args.get("task_id")
    if task_id is None:
        raise RestError(422, "validation_error", "task_id is required")
    return int(task_id)


async def _task_get(c: Call) -> Any:
    return await c.api.call(c.authorization, "GET", f"/tasks/{_own_task(c)}")


async def _progress(c: Call) -> Any:
    return await c.api.call(c.authorization, "POST", f"/tasks/{_own_task(c)}/progress", body={"text": c.args["text"]})


async def _close(c: Call) -> Any:
    body = {"summary": c.args["summary"], "evidence": list(c.args.get("evidence") or [])}
    return await c.api.call(c.authorization, "POST", f"/tasks/{_own_task(c)}/close", body=body)


async def _permission_prompt(c: Call) -> Any:
    """Claude Code's ``--permission-prompt-tool`` (print mode): ``POST /agent/permission``
    (``?format=verdict``) with the tool and its input, waiting for the verdict; answers
    ``{"behavior": "allow", "updatedInput"}`` or ``{"behavior": "deny", "message"}``."""
    tool_input = c.args.get("input")
    body = {"tool_name": c.args["tool_name"], "tool_input": tool_input if isinstance(tool_input, dict) else {}}
    if isinstance(c.args.get("tool_use_id"), str):
        body["tool_use_id"] = c.args["tool_use_id"]
    answer = await c.api.call(c.authorization, "POST", "/agent/permission", body=body, query={"format": "verdict"}, timeout=c.ask_timeout)
    if answer.get("verdict") == "allow":
        return {"behavior": "allow", "updatedInput": body["tool_input"]}
    message = answer.get("message") or f"Elowen gave no verdict in time (decision {answer.get('decision_id')}); ask the user."
    return {"behavior": "deny", "message": message}


async def _ask(c: Call) -> Any:
    """``elowen ask``: ``POST /asks``, then long-poll ``GET /asks/{id}`` until it is no longer
    pending or escalated, or the time limit (returns the record as it is then)."""
    body: dict[str, Any] = {"question": c.args["question"], "history": bool(c.args.get("history", False))}
    if c.principal.scope != "agent" and c.args.get("task_id") is not None:
        body["task_id"] = c.args["task_id"]
    limit = min(float(c.args.get("timeout") or c.ask_timeout), c.ask_timeout)
    record = await c.api.call(c.authorization, "POST", "/asks", body=body)
    deadline = trio.current_time() + limit
    while record.get("status") in ("pending", "escalated"):
        left = deadline - trio.current_time()
        if left <= 0:
            return {**record, "timed_out": True}
        wait = min(ASK_POLL, left)
        record = await c.api.call(
            c.authorization, "GET", f"/asks/{record['id']}", query={"wait": f"{wait:g}", "seen": record["status"]}, timeout=wait + c.api.timeout
        )
    return record


async def _tasks_list(c: Call) -> Any:
    query = {k: c.args.get(k) for k in ("state", "label", "cursor", "limit")}
    query["project"] = c.args.get("project_id")
    return await c.api.call(c.authorization, "GET", "/tasks", query=query)


async def _task_create(c: Call) -> Any:
    keys = ("title", "project_id", "description", "priority", "parent_id", "deps", "labels", "exec")
    return await c.api.call(c.authorization, "POST", "/tasks", body={k: c.args[k] for k in keys if k in c.args})


async def _task_cancel(c: Call) -> Any:
    return await c.api.call(c.authorization, "POST", f"/tasks/{int(c.args['task_id'])}/cancel")


async def _projects_list(c: Call) -> Any:
    return await c.api.call(c.authorization, "GET", "/projects", query={k: c.args.get(k) for k in ("cursor", "limit")})


async def _missions_list(c: Call) -> Any:
    return await c.api.call(c.authorization, "GET", "/missions", query={k: c.args.get(k) for k in ("state", "cursor", "limit")})


async def _mission_set_level(c: Call) -> Any:
    return await c.api.call(c.authorization, "PATCH", f"/missions/{int(c.args['mission_id'])}", body={"level": c.args["level"]})


async def _escalations_list(c: Call) -> Any:
    return await c.api.call(c.authorization, "GET", "/escalations", query={k: c.args.get(k) for k in ("cursor", "limit")})


async def _escalation_answer(c: Call) -> Any:
    body = {k: c.args[k] for k in ("action", "choice", "text", "rationale") if k in c.args}
    return await c.api.call(c.authorization, "POST", f"/escalations/{int(c.args['decision_id'])}", body=body)


async def _brain_chat(c: Call) -> Any:
    """One brain turn (the streamed ``POST /brain/conversations/{id}/turn``, or
    ``/brain/turn`` for the active conversation); returns the assistant's reply."""
    cid = c.args.get("conversation_id")
    path = "/brain/turn" if cid is None else f"/brain/conversations/{int(cid)}/turn"
    replies: list[str] = []
    out: dict[str, Any] = {"conversation_id": cid, "reply": "", "tools": [], "error": None, "done": False}
    with trio.move_on_after(c.turn_timeout) as scope:
        async for item in c.api.stream_lines(c.authorization, path, {"text": c.args["message"]}, timeout=c.turn_timeout):
            kind = item.get("type")
            if kind == "brain.message" and item.get("role") == "assistant" and item.get("content"):
                replies.append(str(item["content"]))
            elif kind == "brain.tool":
                out["tools"].append(item.get("name") or item.get("tool"))
            elif kind in ("brain.error", "brain.aborted"):
                out["error"] = item.get("message") or kind
            elif kind == "brain.done":
                out["conversation_id"] = item.get("conversation_id", cid)
                out["done"] = True
    if scope.cancelled_caught:
        out["error"] = f"the turn did not end within {c.turn_timeout:g} s (it goes on; see the conversation)"
    out["reply"] = "\n\n".join(replies)
    return out


async def _poll(c: Call) -> Any:
    wait = float(c.args.get("wait", 25))
    query = {"wait": f"{wait:g}", "mission": c.args.get("mission_id")}
    return await c.api.call(c.authorization, "GET", "/overseer/poll", query=query, timeout=wait + c.api.timeout)


async def _decide(c: Call) -> Any:
    body = {k: c.args[k] for k in ("action", "confidence", "rationale", "choice", "text") if k in c.args}
    body["id"] = c.args["decision_id"]
    if c.args.get("mission_id") is not None:
        body["mission"] = c.args["mission_id"]
    return await c.api.call(c.authorization, "POST", "/overseer/decide", body=body)


AGENT, PERSON, OVERSEER = "agent", "person", "overseer"

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "task_get",
        "Read a task (an agent: its own task): title, description, state, evidence, dependencies.",
        _obj({"task_id": {**ID, "description": "the task (people only; an agent always reads its own)"}}),
        frozenset({AGENT, PERSON}),
        _task_get,
    ),
    ToolSpec(
        "progress",
        "Post a short progress note on your task (shown to the user and the overseer).",
        _obj({"text": {**TEXT, "maxLength": 10000}}, ("text",)),
        frozenset({AGENT}),
        _progress,
    ),
    ToolSpec(
        "ask",
        "Ask the autopilot a question and wait for the answer (a human answers what it cannot).",
        _obj(
            {
                "question": {**TEXT, "maxLength": 20000},
                "history": {"type": "boolean", "description": "include the recent screen of your session"},
                "task_id": {**ID, "description": "people only: the task the question is about"},
                "timeout": {"type": "number", "minimum": 1, "description": "seconds to wait for the answer at most"},
            },
            ("question",),
        ),
        frozenset({AGENT, PERSON}),
        _ask,
    ),
    ToolSpec(
        "close",
        "Close your task with a summary of what was done and evidence (commands run, files, test results).",
        _obj({"summary": {**TEXT, "maxLength": 20000}, "evidence": {"type": "array", "items": {"type": "string"}, "maxItems": 100}}, ("summary",)),
        frozenset({AGENT}),
        _close,
    ),
    ToolSpec(
        "permission_prompt",
        "Ask Elowen whether a tool call may run (Claude Code --permission-prompt-tool); waits for the overseer's or a human's verdict.",
        _obj(
            {
                "tool_name": {**TEXT, "maxLength": 200},
                "input": {"type": "object", "description": "the tool's input"},
                "tool_use_id": {"type": "string", "maxLength": 200},
            },
            ("tool_name",),
        ),
        frozenset({AGENT}),
        _permission_prompt,
    ),
    ToolSpec(
        "tasks_list",
        "List the tasks you can see, oldest first (state may be 'ready').",
        _obj(
            {
                "state": {"type": "string", "enum": ["open", "in_progress", "blocked", "closed", "cancelled", "ready"]},
                "project_id": ID,
                "label": {"type": "string"},
                "cursor": CURSOR,
                "limit": LIMIT,
            }
        ),
        frozenset({PERSON}),
        _tasks_list,
    ),
    ToolSpec(
        "task_create",
        "Create a task in a project (exec: an executor spec such as 'claude-code' or 'elowen').",
        _obj(
            {
                "title": {**TEXT, "maxLength": 500},
                "project_id": ID,
                "description": {"type": "string"},
                "priority": {"type": "integer", "minimum": 0, "maximum": 4},
                "parent_id": ID,
                "deps": {"type": "array", "items": ID},
                "labels": {"type": "array", "items": {"type": "string"}},
                "exec": {"type": "string"},
            },
            ("title", "project_id"),
        ),
        frozenset({PERSON}),
        _task_create,
    ),
    ToolSpec("task_cancel", "Cancel a task (its owner or an admin).", _obj({"task_id": ID}, ("task_id",)), frozenset({PERSON}), _task_cancel),
    ToolSpec("projects_list", "List the projects you can see.", _obj({"cursor": CURSOR, "limit": LIMIT}), frozenset({PERSON}), _projects_list),
    ToolSpec(
        "missions_list",
        "List the missions you can see with their autonomy level and state, and the active decision path.",
        _obj({"state": {"type": "string", "enum": ["active", "stalled", "paused", "disengaged"]}, "cursor": CURSOR, "limit": LIMIT}),
        frozenset({PERSON}),
        _missions_list,
    ),
    ToolSpec(
        "mission_set_level",
        "Set a mission's autonomy level L0-L3 (the mission's owner or an admin).",
        _obj({"mission_id": ID, "level": {"type": "string", "enum": ["L0", "L1", "L2", "L3"]}}, ("mission_id", "level")),
        frozenset({PERSON}),
        _mission_set_level,
    ),
    ToolSpec(
        "escalations_list",
        "List the decisions waiting for a human (permission prompts, questions, asks) that you can see.",
        _obj({"cursor": CURSOR, "limit": LIMIT}),
        frozenset({PERSON}),
        _escalations_list,
    ),
    ToolSpec(
        "escalation_answer",
        "Answer a waiting decision: approve, reject, pick a choice, or answer a question (the task's owner or an admin).",
        _obj(
            {
                "decision_id": ID,
                "action": {"type": "string", "enum": ["approve", "reject", "choice", "answer"]},
                "choice": {"type": "integer", "minimum": 1},
                "text": {"type": "string"},
                "rationale": {"type": "string"},
            },
            ("decision_id", "action"),
        ),
        frozenset({PERSON}),
        _escalation_answer,
    ),
    ToolSpec(
        "brain_chat",
        "Send a message to Elowen's brain (a conversation of yours, or the active one) and get its reply.",
        _obj({"message": {**TEXT, "maxLength": 100000}, "conversation_id": ID}, ("message",)),
        frozenset({PERSON}),
        _brain_chat,
    ),
    ToolSpec(
        "poll",
        "Parked overseer: wait for the next decision of your mission (null when none within wait seconds).",
        _obj({"wait": {"type": "number", "minimum": 0, "maximum": 60}, "mission_id": {**ID, "description": "admins only"}}),
        frozenset({OVERSEER}),
        _poll,
    ),
    ToolSpec(
        "decide",
        "Parked overseer: answer a decision you polled (approve/reject/escalate/choice/answer, with your confidence 0-1).",
        _obj(
            {
                "decision_id": ID,
                "action": {"type": "string", "enum": ["approve", "reject", "escalate", "choice", "answer"]},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                "rationale": {"type": "string"},
                "choice": {"type": "integer", "minimum": 1},
                "text": {"type": "string"},
                "mission_id": {**ID, "description": "admins only"},
            },
            ("decision_id", "action"),
        ),
        frozenset({OVERSEER}),
        _decide,
    ),
)

_BY_NAME = {t.name: t for t in TOOLS}


def tools_for(audiences: frozenset[str]) -> list[ToolSpec]:
    """The tools a caller of these audiences sees, in table order."""
    return [t for t in TOOLS if t.audiences & audiences]


def find(name: str, audiences: frozenset[str]) -> ToolSpec | None:
    """The tool ``name`` if a caller of these audiences sees it."""
    spec = _BY_NAME.get(name)
    return spec if spec is not None and spec.audiences & audiences else None
