"""REST routes of the notify plugin (builtin: mounted at the paths themselves).

Every route acts for the caller's own notifications (a person's full token; agent tokens are
refused with 403); ``GET /notifications/deliveries`` shows an admin everyone's.

==============================================  ===============================================
``GET  /notifications``                          ``?unread=1&kind=&limit=&cursor=``: newest
                                                 first, ``{"items", "next_cursor", "unread"}``
``GET  /notifications/{id}``                     one, with its ``deliveries``
``POST /notifications/{id}/read``                ``{"marked": 0|1}``
``POST /notifications/read-all``                 ``{"marked": n}``
``GET  /notifications/settings``                 ``{"kinds": {kind: {surface: bool}},
                                                 "surfaces": [names]}`` (``*``: every surface)
``PUT  /notifications/settings``                 ``{"kinds": {kind: {surface: bool}}}``: merged
``POST /notifications/test``                     a test notification to yourself: ``{"id"}``
``GET  /notifications/deliveries``               ``?status=pending|delivered|skipped|failed``
``GET  /notifications/surfaces``                 platform surfaces: registered now or not
``GET  /notifications/push/key``                 ``{"public_key"}``: VAPID applicationServerKey
``GET  /notifications/push/subscriptions``       yours
``POST /notifications/push/subscriptions``       ``PushSubscription.toJSON()`` + ``device``: 201
``DELETE /notifications/push/subscriptions/{id}``  ``{"deleted": true}``
==============================================  ===============================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from elowen_sdk import HTTPError, Request, Response, Route
from elowen_sdk.pagination import decode_cursor, page
from elowen_sdk.services.notify import NOTIFICATION_KINDS

from .outbox import OWN_SURFACES
from .webpush import PushError, check_endpoint

__all__ = ["routes"]

STATUSES = ("pending", "delivered", "skipped", "failed")


def _me(req: Request) -> int:
    p = req.principal
    if p is None or p.user_id is None or p.scope != "full":
        raise HTTPError(403, "forbidden", "notifications belong to a person: use your own token")
    return int(p.user_id)


def _limit(req: Request, default: int = 50) -> int:
    raw = req.query.get("limit")
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 500:
        raise HTTPError(422, "validation_error", "limit: an integer from 1 to 500")
    return int(raw)


def _id(req: Request, name: str = "id") -> int:
    raw = req.params.get(name, "")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:  # beyond SQLite's 64-bit integers: no such row
        raise HTTPError(404, "not_found", f"no notification {raw!r}")
    return int(raw)


def routes(rt: Callable[[], Any]) -> list[Route]:
    """The routes over the current enable's runtime ``rt()`` (``.outbox``, ``.notifier``,
    ``.dispatcher``, ``.config``)."""

    def list_(req: Request) -> dict[str, Any]:
        uid = _me(req)
        limit = _limit(req)
        kind = req.query.get("kind") or None
        if kind is not None and kind not in NOTIFICATION_KINDS:
            raise HTTPError(422, "validation_error", f"kind: one of {', '.join(NOTIFICATION_KINDS)}")
        unread = req.query.get("unread", "") in ("1", "true", "yes")
        rows = rt().outbox.list_for(uid, before=decode_cursor(req.query.get("cursor")), unread=unread, kind=kind, limit=limit)
        return {**page(rows, limit), "unread": rt().outbox.unread_count(uid)}

    def one(req: Request) -> dict[str, Any]:
        uid = _me(req)
        row = rt().outbox.get(_id(req))
        if row is None or row["user_id"] != uid:  # another user's: as if it did not exist
            raise HTTPError(404, "not_found", f"no notification {req.params['id']}")
        return {**row, "deliveries": rt().outbox.deliveries_of(row["id"])}

    def read(req: Request) -> dict[str, Any]:
        uid = _me(req)
        nid = _id(req)
        row = rt().outbox.get(nid)
        if row is None or row["user_id"] != uid:
            raise HTTPError(404, "not_found", f"no notification {nid}")
        return {"marked": rt().outbox.mark_read(uid, nid), "unread": rt().outbox.unread_count(uid)}

    def read_all(req: Request) -> dict[str, Any]:
        uid = _me(req)
        return {"marked": rt().outbox.mark_read(uid), "unread": 0}

    def settings(req: Request) -> dict[str, Any]:
        uid = _me(req)
        return {"kinds": rt().outbox.prefs(uid), "surfaces": [*OWN_SURFACES, *rt().outbox.known_surfaces()]}

    def put_settings(req: Request) -> dict[str, Any]:
        uid = _me(req)
        body = req.json
        kinds = body.get("kinds") if isinstance(body, dict) else None
        if not isinstance(kinds, dict):
            raise HTTPError(422, "validation_error", 'body: {"kinds": {kind: {surface: true|false}}}')
        surfaces = {"*", *OWN_SURFACES, *rt().outbox.known_surfaces()}
        for kind, by in kinds.items():
            if kind not in NOTIFICATION_KINDS:
                raise HTTPError(422, "validation_error", f"unknown kind {kind!r}: one of {', '.join(NOTIFICATION_KINDS)}")
            if not isinstance(by, dict) or not all(isinstance(v, bool) for v in by.values()):
                raise HTTPError(422, "validation_error", f"kinds.{kind}: an object of surface → true|false")
            unknown = sorted(set(by) - surfaces)
            if unknown:
                raise HTTPError(422, "validation_error", f"kinds.{kind}: unknown surface {unknown[0]!r}: one of {', '.join(sorted(surfaces))}")
        rt().outbox.set_prefs(uid, kinds)
        return settings(req)

    def test(req: Request) -> Response:
        uid = _me(req)
        body: dict[str, Any] = req.json if isinstance(req.json, dict) else {}
        title = body.get("title") or "Test notification"
        text = body.get("body") or "Notifications reach you here."
        if not isinstance(title, str) or not isinstance(text, str):
            raise HTTPError(422, "validation_error", "title, body: strings")
        nid = rt().notifier.create(uid, "message", title, text, url="/")
        return Response({"id": nid}, status=201)

    def deliveries(req: Request) -> dict[str, Any]:
        uid = _me(req)
        status = req.query.get("status") or None
        if status is not None and status not in STATUSES:
            raise HTTPError(422, "validation_error", f"status: one of {', '.join(STATUSES)}")
        limit = _limit(req)
        who = None if req.principal is not None and req.principal.is_admin else uid
        rows = rt().outbox.deliveries(user_id=who, status=status, before=decode_cursor(req.query.get("cursor")), limit=limit)
        return page(rows, limit)

    def surfaces(req: Request) -> dict[str, Any]:
        _me(req)
        d = rt().dispatcher
        items = [{**s, "registered": s["name"] in d.surfaces} for s in rt().outbox.surfaces()]
        return {"items": [{"name": "web", "registered": True}, {"name": "push", "registered": d.vapid is not None}, *items]}

    def push_key(req: Request) -> dict[str, Any]:
        _me(req)
        key = rt().dispatcher.vapid
        if key is None:
            raise HTTPError(409, "push_off", "web push is switched off (plugin config web_push = false)")
        return {"public_key": key.public_key}

    def subs(req: Request) -> dict[str, Any]:
        uid = _me(req)
        return {"items": [_public_sub(s) for s in rt().outbox.subscriptions(uid)], "next_cursor": None}

    def subscribe(req: Request) -> Response:
        uid = _me(req)
        if rt().dispatcher.vapid is None:
            raise HTTPError(409, "push_off", "web push is switched off (plugin config web_push = false)")
        body = req.json if isinstance(req.json, dict) else {}
        raw_keys = body.get("keys")
        keys: dict[str, Any] = raw_keys if isinstance(raw_keys, dict) else {}
        device = body.get("device", "")
        if not isinstance(device, str) or len(device) > 200:
            raise HTTPError(422, "validation_error", "device: a string of at most 200 characters")
        try:
            check_endpoint(body.get("endpoint"), keys.get("p256dh"), keys.get("auth"), allow_http=bool(rt().config.get("allow_insecure_endpoints")))
        except PushError as exc:
            raise HTTPError(422, "validation_error", str(exc)) from None
        limit = int(rt().config.get("max_subscriptions", 20))
        mine = rt().outbox.subscriptions(uid)
        if len(mine) >= limit and all(s["endpoint"] != body["endpoint"] for s in mine):
            raise HTTPError(409, "too_many_subscriptions", f"at most {limit} push subscriptions per user: delete one first")
        row = rt().outbox.subscribe(uid, body["endpoint"], keys["p256dh"], keys["auth"], device)
        return Response(_public_sub(row), status=201)

    def unsubscribe(req: Request) -> dict[str, Any]:
        uid = _me(req)
        sid = _id(req)
        row = rt().outbox.subscription(sid)
        if row is None or (row["user_id"] != uid and not (req.principal is not None and req.principal.is_admin)):
            raise HTTPError(404, "not_found", f"no push subscription {sid}")
        return {"deleted": rt().outbox.unsubscribe(sid)}

    # literal paths before /notifications/{id}: the first matching route answers
    return [
        Route("GET", "/notifications", list_, "Your notifications, newest first"),
        Route("POST", "/notifications/read-all", read_all, "Mark all your notifications read"),
        Route("GET", "/notifications/settings", settings, "Which kinds reach you on which surface"),
        Route("PUT", "/notifications/settings", put_settings, "Switch kinds per surface"),
        Route("POST", "/notifications/test", test, "Send yourself a test notification"),
        Route("GET", "/notifications/deliveries", deliveries, "The outbox: deliveries and their state"),
        Route("GET", "/notifications/surfaces", surfaces, "Notification surfaces"),
        Route("GET", "/notifications/push/key", push_key, "The VAPID public key for PushManager.subscribe"),
        Route("GET", "/notifications/push/subscriptions", subs, "Your web push subscriptions"),
        Route("POST", "/notifications/push/subscriptions", subscribe, "Add a web push subscription"),
        Route("DELETE", "/notifications/push/subscriptions/{id}", unsubscribe, "Remove a web push subscription"),
        Route("GET", "/notifications/{id}", one, "One notification with its deliveries"),
        Route("POST", "/notifications/{id}/read", read, "Mark a notification read"),
    ]


def _public_sub(row: dict[str, Any]) -> dict[str, Any]:
    """A subscription without its keys."""
    return {k: row[k] for k in ("id", "endpoint", "device", "created_at", "last_ok_at")}
