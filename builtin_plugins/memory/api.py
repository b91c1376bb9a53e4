"""REST routes of the memory plugin (mounted at their paths: a builtin plugin).

Every route acts on the **caller's own** memories (``principal.user_id``); no route takes a
user id that would show another user's text. An admin may purge a user's memories (the count
comes back, never text). Agent tokens (``scope = "agent"``) have no memories.

``GET /memories``                     the caller's memories, newest first (``?all=1`` with superseded versions; ``?kind=``; page shape)
``POST /memories``                    add ``{text, kind?, importance?, project_id?}`` → 201 the memory
``GET /memories/search?q=&limit=``    ranked recall without counting a use
``GET /memories/export``              every version of every memory of the caller
``GET /memories/status``              embedding queue and recall counters
``POST /memories/purge``              admin: ``{user_id}`` → ``{deleted}``
``GET /memories/{id}``                one memory (any version)
``PATCH /memories/{id}``              update: ``{text?, kind?, importance?}`` supersedes it → the new version
``DELETE /memories/{id}``             forget → ``{forgotten: id}``
``GET /memories/{id}/history``        every version of its chain, oldest first
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from elowen_sdk import HTTPError, Request, Response, Route
from elowen_sdk.pagination import decode_cursor, page
from elowen_sdk.services.memory import InvalidMemory, MemoryNotFound

from .service import MemoryBackend

__all__ = ["record", "routes"]

PUBLIC = (
    "id",
    "text",
    "kind",
    "importance",
    "source",
    "provenance",
    "project_id",
    "conversation_id",
    "message_id",
    "occurred_at",
    "actor",
    "created_at",
    "updated_at",
    "last_used_at",
    "use_count",
    "supersedes",
    "superseded_by",
    "superseded_at",
    "superseded_actor",
)


def record(row: dict[str, Any]) -> dict[str, Any]:
    """A memory row as the API shows it to its owner (``state``: current, superseded or
    forgotten)."""
    out = {k: row.get(k) for k in PUBLIC}
    sup = row.get("superseded_by")
    out["state"] = "current" if sup is None else ("forgotten" if sup == row["id"] else "superseded")
    return out


def _user(request: Request) -> int:
    p = request.principal
    if p is None or p.scope != "full" or p.user_id is None:
        raise HTTPError(403, "forbidden", "memories belong to signed-in users; agent tokens have none")
    return int(p.user_id)


def _id(request: Request) -> int:
    raw = request.params.get("id", "")
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise HTTPError(404, "not_found", f"no memory {raw!r}")
    return int(raw)


def _int(value: Any, name: str, lo: int, hi: int, default: int) -> int:
    if value is None or value == "":
        return default
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise HTTPError(422, "validation_error", f"{name}: an integer from {lo} to {hi}") from None
    if not lo <= n <= hi:
        raise HTTPError(422, "validation_error", f"{name}: an integer from {lo} to {hi}")
    return n


def _body(request: Request) -> dict[str, Any]:
    if not isinstance(request.json, dict):
        raise HTTPError(400, "bad_request", "a JSON object body is required")
    return request.json


def _invalid(exc: Exception) -> HTTPError:
    return HTTPError(422, "validation_error", str(exc))


def routes(backend: Callable[[], MemoryBackend], project_exists: Callable[[int], bool] = lambda _id: True) -> list[Route]:
    """The routes over the current enable's backend (looked up per request);
    ``project_exists(id)``: whether a project of that id exists (the ``tasks`` service)."""

    def list_memories(request: Request) -> Any:
        uid = _user(request)
        limit = _int(request.query.get("limit"), "limit", 1, 200, 50)
        before = decode_cursor(request.query.get("cursor"))
        kind = request.query.get("kind") or None
        rows = backend().store.list(uid, include_superseded=request.query.get("all") in ("1", "true"), before=before, limit=limit + 1, kind=kind)
        return page([record(r) for r in rows], limit)

    def add(request: Request) -> Any:
        uid = _user(request)
        body = _body(request)
        unknown = set(body) - {"text", "kind", "importance", "project_id"}
        if unknown:
            raise HTTPError(422, "validation_error", f"unknown field(s): {', '.join(sorted(unknown))}")
        project_id = body.get("project_id")
        if project_id is not None:
            if (
                not isinstance(project_id, int)
                or isinstance(project_id, bool)
                or not request.principal.can_see_project(project_id)
                or not project_exists(project_id)
            ):
                raise HTTPError(422, "validation_error", "project_id: one of your projects")
        try:
            row = backend().add(uid, body.get("text"), kind=body.get("kind", "fact"), importance=body.get("importance", 0.5), project_id=project_id)  # type: ignore[arg-type]
        except InvalidMemory as exc:
            raise _invalid(exc) from None
        return Response(record(row), status=201)

    async def search(request: Request) -> Any:
        uid = _user(request)
        q = request.query.get("q", "")
        if not q.strip():
            raise HTTPError(422, "validation_error", "q: the text to search for (?q=…)")
        limit = _int(request.query.get("limit"), "limit", 1, 100, 6)
        try:
            found = await backend().search(uid, q, limit=limit)
        except InvalidMemory as exc:
            raise _invalid(exc) from None
        b = backend()
        return {"items": [{**record(b.require(uid, m.id)), "score": m.score} for m in found]}

    def export(request: Request) -> Any:
        uid = _user(request)
        rows = backend().store.store.query("SELECT * FROM memory_items WHERE user_id = ? ORDER BY id", (uid,))
        return {"user_id": uid, "items": [record(r) for r in rows]}

    def status(request: Request) -> Any:
        return dict(backend().status(_user(request)))

    def purge(request: Request) -> Any:
        p = request.principal
        if p is None or not p.is_admin:
            raise HTTPError(403, "forbidden", "only an admin may purge a user's memories")
        target = _body(request).get("user_id")
        if not isinstance(target, int) or isinstance(target, bool) or target < 1:
            raise HTTPError(422, "validation_error", "user_id: a user id")
        return {"user_id": target, "deleted": backend().purge(target, by=f"user:{p.user_id}")}

    def show(request: Request) -> Any:
        uid, mid = _user(request), _id(request)
        try:
            return record(backend().require(uid, mid))
        except MemoryNotFound as exc:
            raise HTTPError(404, "not_found", str(exc)) from None

    def update(request: Request) -> Any:
        uid, mid = _user(request), _id(request)
        body = _body(request)
        unknown = set(body) - {"text", "kind", "importance"}
        if unknown or not body:
            raise HTTPError(422, "validation_error", f"unknown field(s): {', '.join(sorted(unknown))}" if unknown else "nothing to change")
        b = backend()
        old = b.store.current(uid, mid)
        if old is None:
            raise HTTPError(404, "not_found", f"no current memory {mid}")
        try:
            row = b.add(
                uid,
                body.get("text", old["text"]),
                kind=body.get("kind", old["kind"]),
                importance=body.get("importance", old["importance"]),
                source=old["source"],
                provenance=old["provenance"],
                project_id=old["project_id"],
                actor=f"user:{uid}",
                supersedes=mid,
            )
        except InvalidMemory as exc:
            raise _invalid(exc) from None
        except MemoryNotFound as exc:
            raise HTTPError(404, "not_found", str(exc)) from None
        return record(row)

    def forget(request: Request) -> Any:
        uid, mid = _user(request), _id(request)
        if backend().forget_one(uid, mid, actor=f"user:{uid}") is None:
            raise HTTPError(404, "not_found", f"no current memory {mid}")
        return {"forgotten": mid}

    def history(request: Request) -> Any:
        uid, mid = _user(request), _id(request)
        try:
            return {"items": [record(r) for r in backend().store.history(uid, mid)]}
        except MemoryNotFound as exc:
            raise HTTPError(404, "not_found", str(exc)) from None

    return [  # literal paths before /memories/{id}: the first matching route serves
        Route("GET", "/memories", list_memories, summary="Your memories, newest first (?all=1: with superseded versions)."),
        Route("POST", "/memories", add, summary="Remember a fact: {text, kind?, importance?, project_id?}."),
        Route("GET", "/memories/search", search, summary="Your memories ranked for ?q= (no use is counted)."),
        Route("GET", "/memories/export", export, summary="Every version of every memory of yours."),
        Route("GET", "/memories/status", status, summary="Embedding queue and recall counters."),
        Route("POST", "/memories/purge", purge, summary="Admin: delete every memory of {user_id}."),
        Route("GET", "/memories/{id}", show, summary="One of your memories (any version)."),
        Route("PATCH", "/memories/{id}", update, summary="Update a memory: the new version supersedes it."),
        Route("DELETE", "/memories/{id}", forget, summary="Forget a memory (its text stays in its history)."),
        Route("GET", "/memories/{id}/history", history, summary="Every version of a memory, oldest first."),
    ]
