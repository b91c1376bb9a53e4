"""The installable web app and notifications: the web app manifest, the service worker (at the
site root, so its scope is every page), the notifications page, and the relays the page's
script uses for web push (the notify plugin's ``/notifications`` routes on the daemon).

Manifest members follow the W3C "Web Application Manifest" (``name``, ``short_name``,
``start_url``, ``scope``, ``display``, ``icons`` with 192 and 512 px PNGs, ``theme_color``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quart import Blueprint, Response, jsonify, render_template, request

from .common import api, login_required
from .panels import load

__all__ = ["MANIFEST", "bp"]

bp = Blueprint("notify", __name__)

STATIC = Path(__file__).resolve().parent.parent / "static"

MANIFEST: dict[str, Any] = {
    "name": "Elowen",
    "short_name": "Elowen",
    "description": "Your self-hosted AI agent: chat, tasks, escalations and notifications.",
    "start_url": "/",
    "scope": "/",
    "id": "/",
    "display": "standalone",
    "background_color": "#f5f6f8",
    "theme_color": "#3559d6",
    "icons": [
        {"src": "/static/icons/icon-192.png", "sizes": "192x192", "type": "image/png", "purpose": "any"},
        {"src": "/static/icons/icon-512.png", "sizes": "512x512", "type": "image/png", "purpose": "any maskable"},
    ],
}


@bp.get("/manifest.webmanifest")
async def manifest() -> Response:
    """The web app manifest (no login: browsers fetch it without credentials)."""
    resp = jsonify(MANIFEST)
    resp.mimetype = "application/manifest+json"
    resp.headers["Cache-Control"] = "max-age=3600"
    return resp


@bp.get("/sw.js")
async def service_worker() -> Response:
    """The service worker, from the site root so that its scope is ``/``; never cached long,
    so an update reaches browsers on their next visit."""
    resp = Response((STATIC / "sw.js").read_bytes(), mimetype="text/javascript")
    resp.headers["Cache-Control"] = "no-cache"
    resp.headers["Service-Worker-Allowed"] = "/"
    return resp


def _relay(reply: Any) -> Response:
    resp = jsonify(reply.body if reply.body is not None else {})
    resp.status_code = 404 if reply.missing else reply.status
    if reply.missing:
        resp = jsonify({"error": {"code": "notify_off", "message": "The notify plugin is off — turn it on in Settings → Plugins."}})
        resp.status_code = 404
    return resp


@bp.get("/notifications")
@login_required
async def page() -> str:
    """Your notifications, newest first, with the push switch for this device."""
    reply = await api("GET", "/notifications", params={"limit": 100})
    subs = await api("GET", "/notifications/push/subscriptions") if reply.ok else None
    return await render_template(
        "notifications.html",
        page="notifications",
        notify_off=reply.missing,
        items=reply.items(),
        unread=(reply.body or {}).get("unread", 0) if reply.ok else 0,
        subscriptions=subs.items() if subs else [],
        error=None if reply.ok or reply.missing else reply.error_message(),
        **await load("badge"),
    )


@bp.get("/notify/key")
@login_required
async def push_key() -> Response:
    return _relay(await api("GET", "/notifications/push/key"))


@bp.post("/notify/subscribe")
@login_required
async def subscribe() -> Response:
    body = await request.get_json(silent=True)
    if not isinstance(body, dict):
        return Response('{"error": {"code": "validation_error", "message": "a PushSubscription as JSON"}}', status=422, mimetype="application/json")
    return _relay(await api("POST", "/notifications/push/subscriptions", json=body))


@bp.post("/notify/read/<int:notification_id>")
@login_required
async def read(notification_id: int) -> Response:
    return _relay(await api("POST", f"/notifications/{notification_id}/read"))


@bp.post("/notify/read-all")
@login_required
async def read_all() -> Response:
    return _relay(await api("POST", "/notifications/read-all"))
