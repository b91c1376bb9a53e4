"""The brain's HTTP routes (builtin: mounted at their paths by the daemon). Every route needs
a full-scope token (agent tokens get 403) and acts on the caller's own conversations only
(another user's conversation answers 404).

==========================================  =====================================================
``GET  /brain/conversations``               ``{"items": [conversation + active], "next_cursor"}``
``POST /brain/conversations``               ``{title?, model?, project_id?, activate?}`` → 201
``GET  /brain/conversations/{id}``          ``{"conversation", "messages", "goal", "yolo", "busy"}``
``PATCH /brain/conversations/{id}``         ``{model?: "PROVIDER/MODEL" | "", title?}`` → the conversation
``POST /brain/conversations/{id}/open``     move the pointer here (the web dock follows it)
``POST /brain/conversations/{id}/turn``     session-bound turn, streamed (see below)
``POST /brain/conversations/{id}/abort``    ``{"aborted": bool}``
``GET  /brain/active``                      the active conversation's view; 404
                                            ``no_active_conversation`` when there is none
                                            (a ``POST /brain/turn`` creates one)
``GET  /brain/model``                       the model the active (or a new) conversation uses:
                                            ``{spec, kind, tools, ready, problem}``; ``ready``
                                            false when no model can answer (``problem``: why)
``POST /brain/turn``                        pointer-based turn, streamed
``POST /brain/abort``                       abort the active conversation's turn
``GET  /brain/approvals``                   ``{"items": [pending approvals and questions]}``
``POST /brain/approvals/{id}``              ``{"decision": "allow"|"reject"}`` or ``{"answer": str}``
``GET  /brain/prefs`` / ``PATCH``           ``{"yolo": bool}`` — the persisted YOLO default
``GET  /brain/channels``                    ``{"items": [your chat-platform links], "platforms":
                                            [{name, plugin, state, error, detail}]}``; state: running, not_configured, error…
``POST /brain/channels/link``               ``{"code": "ABCD-EFGH"}`` → the link; 404
                                            ``invalid_code`` (unknown, expired or used)
``POST /brain/channels/unlink``             ``{"platform", "platform_user"}`` → ``{"unlinked":
                                            true}``; 404 when you have no such link
==========================================  =====================================================

Turn bodies: ``{"text": str, "max_turns"?: 1–500}`` (``max_turns``: the turn budget of a goal
this call starts or resumes). The answer streams one JSON object per event: NDJSON
(``application/x-ndjson``, default) or, with ``?format=sse``, ``text/event-stream``
(``event: <type>``/``data: <json>``). Event types: ``brain.message``, ``brain.delta``,
``brain.tool``, ``brain.approval``, ``brain.approval_decided``, ``brain.command``,
``brain.goal``, ``brain.compacted``, ``brain.error``, ``brain.aborted``, and last
``brain.done`` (with the goal). ``?stream=false`` runs the turn to its end and answers JSON.

A ``model`` (create or PATCH) is checked against the relay's providers: an unknown provider
answers 422 ``unknown_provider`` listing the configured ones, and nothing is changed.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

from elowen_sdk import HTTPError, Request, Response, Route
from elowen_sdk.pagination import decode_cursor, page

from .service import BadModel, BrainService, Busy

__all__ = ["routes"]

MAX_TEXT = 100_000
MAX_ID = 2**63 - 1  # SQLite integers are signed 64-bit; larger ints overflow when bound
_DIGITS = re.compile(r"[0-9]{1,19}")


def _id(raw: str, what: str) -> int:
    """A path parameter as a row id in ``1..MAX_ID``; raises 404 ``not_found`` otherwise."""
    if not _DIGITS.fullmatch(raw) or not 1 <= int(raw) <= MAX_ID:
        raise HTTPError(404, "not_found", f"{what} {raw!r} not found")
    return int(raw)


def _me(request: Request) -> int:
    principal = request.principal
    if principal is None or principal.scope != "full":
        raise HTTPError(403, "agent_scope", "the brain needs a user token")
    return principal.user_id


def _cid(request: Request) -> int:
    return _id(request.params.get("id", ""), "conversation")


def _body(request: Request) -> dict[str, Any]:
    body = request.json if request.json is not None else {}
    if not isinstance(body, dict):
        raise HTTPError(422, "validation_error", "the body must be a JSON object")
    return body


def _opt(body: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    value = body.get(key, default)
    if value is not default and (not isinstance(value, kind) or isinstance(value, bool) and kind is int):
        raise HTTPError(422, "validation_error", f"{key}: wrong type")
    return value


def _limit(raw: str | None) -> int:
    if raw is None:
        return 50
    if not _DIGITS.fullmatch(raw) or not 1 <= int(raw) <= 500:
        raise HTTPError(422, "validation_error", "limit: 1–500")
    return int(raw)


def _lookup(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except LookupError as exc:
        raise HTTPError(404, "not_found", str(exc)) from None
    except BadModel as exc:
        raise HTTPError(422, "unknown_provider", str(exc)) from None


def routes(service: BrainService) -> list[Route]:
    """Every brain route, bound to ``service``."""

    def list_conversations(request: Request) -> dict[str, Any]:
        me = _me(request)
        limit = _limit(request.query.get("limit"))
        rows = service.list_conversations(me, after=decode_cursor(request.query.get("cursor")), limit=limit + 1)
        return page(rows, limit)

    def list_goals(request: Request) -> dict[str, Any]:
        me = _me(request)
        state = request.query.get("state") or "paused"
        if state not in ("draft", "active", "paused", "done", "cleared"):
            raise HTTPError(422, "validation_error", "state: draft, active, paused, done or cleared")
        return {"items": service.db.goals_of(me, state, limit=_limit(request.query.get("limit"))), "next_cursor": None}

    def create_conversation(request: Request) -> Response:
        me = _me(request)
        body = _body(request)
        project_id = _opt(body, "project_id", int)
        if project_id is not None and not 1 <= project_id <= MAX_ID:
            raise HTTPError(422, "validation_error", f"project_id: a positive integer id (at most {MAX_ID})")
        conv = _lookup(
            service.create_conversation,
            me,
            title=_opt(body, "title", str, "") or "",
            model=_opt(body, "model", str, "") or "",
            project_id=project_id,
            activate=bool(_opt(body, "activate", bool, False)),
        )
        return Response(conv, status=201)

    def get_conversation(request: Request) -> dict[str, Any]:
        return _lookup(service.view, _me(request), _cid(request))

    def patch_conversation(request: Request) -> dict[str, Any]:
        me = _me(request)
        cid = _cid(request)
        body = _body(request)
        model, title = _opt(body, "model", str), _opt(body, "title", str)
        if model is None and title is None:
            raise HTTPError(422, "validation_error", "give model and/or title")
        conv = _lookup(service.conversation, me, cid)
        if model is not None:
            conv = _lookup(service.set_model, me, cid, model)
        if title is not None:
            service.db.update_conversation(cid, title=title.strip()[:200])
            conv = _lookup(service.conversation, me, cid)
        return conv

    def open_conversation(request: Request) -> dict[str, Any]:
        return _lookup(service.open, _me(request), _cid(request))

    def get_active(request: Request) -> dict[str, Any]:
        me = _me(request)
        conv = service.active(me, create=False)
        if conv is None:
            raise HTTPError(404, "no_active_conversation", "no active conversation: send a turn (POST /brain/turn) or open one")
        return service.view(me, conv["id"])

    def get_model(request: Request) -> dict[str, Any]:
        me = _me(request)
        conv = service.active(me, create=False) or {"model": ""}
        return service.model_info(conv)

    async def _turn(request: Request, cid: int | None) -> Any:
        me = _me(request)
        body = _body(request)
        text = body.get("text")
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
            raise HTTPError(422, "validation_error", f"text: a non-empty string of at most {MAX_TEXT} characters")
        max_turns = _opt(body, "max_turns", int)
        if max_turns is not None and not 1 <= max_turns <= 500:
            raise HTTPError(422, "validation_error", "max_turns: 1–500")
        try:
            service.reserve(me, cid, text)
        except LookupError as exc:
            raise HTTPError(404, "not_found", str(exc)) from None
        except Busy as exc:
            raise HTTPError(409, "turn_running", str(exc)) from None
        if request.query.get("stream", "true") == "false":
            try:
                return await service.turn(me, cid, text, max_turns=max_turns)
            except Busy as exc:
                raise HTTPError(409, "turn_running", str(exc)) from None
        sse = request.query.get("format") == "sse"
        events = service.stream(me, cid, text, max_turns=max_turns)

        async def body_stream() -> AsyncIterator[str]:
            try:
                async for item in events:
                    data = json.dumps(item, ensure_ascii=False, default=str)
                    yield f"event: {item['type']}\ndata: {data}\n\n" if sse else data + "\n"
            except Busy as exc:  # lost a race with another request
                err = {"type": "brain.error", "message": str(exc), "code": "turn_running"}
                yield f"event: brain.error\ndata: {json.dumps(err)}\n\n" if sse else json.dumps(err) + "\n"
            finally:
                await events.aclose()  # type: ignore[attr-defined]

        return Response(stream=body_stream(), content_type="text/event-stream" if sse else "application/x-ndjson")

    async def turn_bound(request: Request) -> Any:
        return await _turn(request, _cid(request))

    async def turn_pointer(request: Request) -> Any:
        return await _turn(request, None)

    def abort_bound(request: Request) -> dict[str, Any]:
        return {"aborted": _lookup(service.abort, _me(request), _cid(request))}

    def abort_pointer(request: Request) -> dict[str, Any]:
        return {"aborted": service.abort(_me(request), None)}

    def list_approvals(request: Request) -> dict[str, Any]:
        return {"items": service.pending(_me(request)), "next_cursor": None}

    def decide(request: Request) -> dict[str, Any]:
        me = _me(request)
        approval_id = _id(request.params.get("id", ""), "approval")
        body = _body(request)
        decision = body.get("decision")
        answer = _opt(body, "answer", str)
        if decision not in (None, "allow", "reject") or (decision is None and answer is None):
            raise HTTPError(422, "validation_error", "give decision 'allow' or 'reject', or an answer")
        try:
            return service.decide(me, approval_id, allow=None if decision is None else decision == "allow", answer=answer)
        except LookupError as exc:
            raise HTTPError(404, "not_found", str(exc)) from None
        except ValueError as exc:
            raise HTTPError(409, "not_pending", str(exc)) from None

    def get_prefs(request: Request) -> dict[str, Any]:
        return service.prefs(_me(request))

    def patch_prefs(request: Request) -> dict[str, Any]:
        me = _me(request)
        yolo = _opt(_body(request), "yolo", bool)
        if yolo is None:
            raise HTTPError(422, "validation_error", "yolo: a boolean")
        return service.set_yolo_default(me, yolo)

    def list_channels(request: Request) -> dict[str, Any]:
        return {"items": service.channel_links(_me(request)), "platforms": service.platforms.status()}

    def link_channel(request: Request) -> dict[str, Any]:
        me = _me(request)
        code = _opt(_body(request), "code", str)
        if not code or len(code) > 64:
            raise HTTPError(422, "validation_error", "code: the link code the chat platform showed (e.g. ABCD-EFGH)")
        try:
            return service.link_channel(me, code)
        except LookupError as exc:
            raise HTTPError(404, "invalid_code", f"{exc}: send a new message on the platform for a fresh code") from None

    def unlink_channel(request: Request) -> dict[str, Any]:
        me = _me(request)
        body = _body(request)
        platform, platform_user = _opt(body, "platform", str), _opt(body, "platform_user", str)
        if not platform or not platform_user:
            raise HTTPError(422, "validation_error", "give platform and platform_user (as GET /brain/channels lists them)")
        if not service.unlink_channel(me, platform, platform_user):
            raise HTTPError(404, "not_found", f"no link of {platform}:{platform_user}")
        return {"unlinked": True}

    return [
        Route("GET", "/brain/conversations", list_conversations, "List your brain conversations"),
        Route("POST", "/brain/conversations", create_conversation, "Create a brain conversation"),
        Route("GET", "/brain/conversations/{id}", get_conversation, "A conversation with its messages and goal"),
        Route("PATCH", "/brain/conversations/{id}", patch_conversation, "Change a conversation's model or title"),
        Route("POST", "/brain/conversations/{id}/open", open_conversation, "Make a conversation the active one"),
        Route("POST", "/brain/conversations/{id}/turn", turn_bound, "Run a turn in a conversation (streamed)"),
        Route("POST", "/brain/conversations/{id}/abort", abort_bound, "Abort a conversation's running turn"),
        Route("GET", "/brain/active", get_active, "The active conversation"),
        Route("GET", "/brain/model", get_model, "The model your chat's next turn uses, and whether it can answer"),
        Route("POST", "/brain/turn", turn_pointer, "Run a turn in the active conversation (streamed)"),
        Route("POST", "/brain/abort", abort_pointer, "Abort the active conversation's turn"),
        Route("GET", "/brain/approvals", list_approvals, "Pending brain approvals and questions"),
        Route("GET", "/brain/goals", list_goals, "Your goals in one state (default paused), newest first"),
        Route("POST", "/brain/approvals/{id}", decide, "Allow or reject a tool call, or answer a question"),
        Route("GET", "/brain/prefs", get_prefs, "Your brain preferences"),
        Route("PATCH", "/brain/prefs", patch_prefs, "Set your YOLO default"),
        Route("GET", "/brain/channels", list_channels, "Your chat-platform links and the running platforms"),
        Route("POST", "/brain/channels/link", link_channel, "Link a chat-platform sender to you with its link code"),
        Route("POST", "/brain/channels/unlink", unlink_channel, "Forget one of your chat-platform links"),
    ]
