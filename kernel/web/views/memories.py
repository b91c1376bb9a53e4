"""The Memories page: what the ``memory`` plugin remembers about the signed-in user (its
``/memories`` routes, called with the user's own token — so every user, admins included, sees
only their own memories), searched, filtered by kind, added, edited (an edit supersedes: the old
text stays in the memory's history), forgotten (after a confirmation) and traced to where each
came from (saved by hand, by the brain, or learnt by the curator from a conversation).

With the memory plugin disabled the routes answer 404 and the page says long-term memory is off.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, abort, render_template, request

from ..upstream import Reply
from .common import api, login_required, me

__all__ = ["bp", "history", "memories", "who"]

bp = Blueprint("memories", __name__)

#: Kinds the filter and the forms always offer (the plugin accepts any lower-case word).
KINDS = ("fact", "preference", "project", "person")
#: Memories per page of the list (``GET /memories?limit=``); a search shows its best 100.
PAGE = 50
SEARCH_LIMIT = 100
#: Conversations whose titles are looked up per rendering at most.
MAX_TITLES = 20


def who(actor: Any, my_id: Any) -> str:
    """What to show for a version's ``actor``: ``"you"`` (``user:<my id>``), ``"the brain"``
    (``brain:user:<id>``, the ``memory.save`` / ``memory.forget`` tools), ``"the curator"``,
    an admin's purge, else the actor as stored."""
    text = str(actor or "")
    if text == f"user:{my_id}":
        return "you"
    if text.startswith("brain"):
        return "the brain"
    if text.startswith("curator"):
        return "the curator"
    return text or "unknown"


def _filters(args: dict[str, str]) -> dict[str, str]:
    q = (args.get("q") or "").strip()[:500]
    kind = (args.get("kind") or "").strip()[:32]
    return {"q": q, "kind": kind, "cursor": (args.get("cursor") or "").strip()}


async def _titles(ids: set[str]) -> dict[str, str]:
    """``{conversation id: title}`` of the user's own conversations among ``ids`` (the brain's
    ``GET /brain/conversations/{id}``; one that is gone or not theirs is left out)."""
    from .panels import deferred, gather  # panels imports this module

    wanted = sorted(i for i in ids if i.isdigit())[:MAX_TITLES]
    if not wanted:
        return {}
    found = await gather(**{i: deferred("GET", f"/brain/conversations/{i}") for i in wanted})
    out: dict[str, str] = {}
    for i, reply in found.items():
        if reply.ok and isinstance(reply.body, dict):
            inner = reply.body.get("conversation")
            conv: dict[str, Any] = inner if isinstance(inner, dict) else reply.body
            out[i] = str(conv.get("title") or "") or f"conversation {i}"
    return out


async def _curation() -> bool | None:
    """Whether automatic curation is on (the curator plugin enabled with ``auto``); ``None``
    when the curator is not installed."""
    reply = await api("GET", "/plugins/curator")
    if not reply.ok or not isinstance(reply.body, dict):
        return None
    config = reply.body.get("config") or {}
    return reply.body.get("state") == "enabled" and bool(config.get("auto"))


async def memories(args: dict[str, str]) -> dict[str, Any]:
    """The list panel: the user's current memories, newest first (``GET /memories``, ``kind``
    and ``cursor`` passed on), or the best matches of ``q`` (``GET /memories/search``, then
    filtered by ``kind``). ``memory_missing`` when the plugin is off; ``curation`` (on, off,
    ``None``: no curator) for the empty state."""
    f = _filters(args)
    if f["q"]:
        reply = await api("GET", "/memories/search", params={"q": f["q"], "limit": SEARCH_LIMIT})
    else:
        reply = await api("GET", "/memories", params={"kind": f["kind"], "limit": PAGE, "cursor": f["cursor"]})
    items = [m for m in reply.items() if not f["kind"] or m.get("kind") == f["kind"]]
    ctx: dict[str, Any] = {
        "items": items,
        "filters": f,
        "kinds": KINDS,
        "memory_missing": _no_route(reply),
        "memory_failed": None if reply.ok or _no_route(reply) else reply.error_message(),
        "next_cursor": (reply.body or {}).get("next_cursor") if reply.ok and not f["q"] else None,
        "titles": await _titles({str(m["conversation_id"]) for m in items if m.get("conversation_id")}),
        "curation": None,
        "me_id": me().user.get("id"),
        "who": who,
    }
    if not items and reply.ok and not f["q"] and not f["kind"]:
        ctx["curation"] = await _curation()
    return ctx


async def history(args: dict[str, str]) -> dict[str, Any]:
    """One memory's versions, oldest first (``GET /memories/{id}/history``)."""
    mid = args.get("id", "")
    if not mid.isdigit():
        abort(404)
    reply = await api("GET", f"/memories/{mid}/history")
    return {"mid": mid, "versions": reply.items(), "error": None if reply.ok else reply.error_message(), "me_id": me().user.get("id"), "who": who}


@bp.get("/memories")
@login_required
async def page() -> str:
    from .panels import load

    args = dict(request.args.items())
    ctx = await load("badge", "memories", args=args)
    return await render_template("memories.html", page="memories", **ctx)


async def _form() -> dict[str, str]:
    return {k: v for k, v in (await request.form).items() if k != "csrf_token"}


def _importance(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return -1.0  # the daemon answers what is allowed
    return value


async def _panel(form: dict[str, str], flash: str, ok: bool) -> Any:
    """The re-rendered list (keeping the form's ``q``/``kind`` filters) with a message."""
    ctx = await memories({"q": form.get("q", ""), "kind": form.get("filter_kind", "")})
    html = await render_template("partials/memories.html", **ctx, flash=flash, flash_ok=ok)
    return (html, 200, {"X-Elowen-Ok": "1"}) if ok else (html, 200)


def _no_route(reply: Reply) -> bool:
    """A 404 of the daemon's plugin dispatch (no plugin serves the path: it is off), not of the
    route itself (an unknown or another user's memory)."""
    return reply.missing and reply.error_message().startswith("no route ")


def _refused(reply: Reply) -> str:
    if _no_route(reply):
        return "Not available: long-term memory (the memory plugin) is off."
    return reply.error_message()


@bp.post("/actions/memories")
@login_required
async def add() -> Any:
    """Remember a fact from the add form (``text``, ``kind``, ``importance``)."""
    form = await _form()
    body: dict[str, Any] = {"text": form.get("text", ""), "kind": (form.get("kind") or "fact").strip()}
    importance = _importance(form.get("importance"))
    if importance is not None:
        body["importance"] = importance
    if not body["text"].strip():
        return await _panel(form, "Write the fact to remember.", False)
    reply = await api("POST", "/memories", json=body)
    if not reply.ok:
        return await _panel(form, _refused(reply), False)
    return await _panel(form, f"Remembered (memory {reply.body['id']}).", True)


@bp.post("/actions/memories/<int:mid>/edit")
@login_required
async def edit(mid: int) -> Any:
    """Save an edit: the new version supersedes memory ``mid`` (its text stays in the history)."""
    form = await _form()
    body: dict[str, Any] = {"text": form.get("text", ""), "kind": (form.get("kind") or "fact").strip()}
    importance = _importance(form.get("importance"))
    if importance is not None:
        body["importance"] = importance
    reply = await api("PATCH", f"/memories/{mid}", json=body)
    if not reply.ok:
        return await _panel(form, _refused(reply), False)
    return await _panel(form, f"Saved: memory {reply.body['id']} replaces memory {mid} (the old text is in its history).", True)


@bp.post("/actions/memories/<int:mid>/forget")
@login_required
async def forget(mid: int) -> Any:
    """Forget memory ``mid`` (it is no longer recalled; its text stays in its history)."""
    form = await _form()
    reply = await api("DELETE", f"/memories/{mid}")
    if not reply.ok:
        return await _panel(form, _refused(reply), False)
    return await _panel(form, f"Forgot memory {mid}. It is no longer recalled; its text stays in its history.", True)


@bp.post("/actions/memories/conversations/<int:cid>/open")
@login_required
async def open_conversation(cid: int) -> Any:
    """Make conversation ``cid`` the chat's conversation (``POST /brain/conversations/{id}/open``);
    the page then opens the chat dock on it (``HX-Trigger: elowen:open-chat``)."""
    reply = await api("POST", f"/brain/conversations/{cid}/open")
    if not reply.ok:
        text = "Not available: the brain plugin is off." if _no_route(reply) else reply.error_message()
        return await render_template("partials/flash.html", ok=False, text=text)
    html = await render_template("partials/flash.html", ok=True, text="Opened in the chat.")
    return html, 200, {"HX-Trigger": "elowen:open-chat", "X-Elowen-Ok": "1"}
