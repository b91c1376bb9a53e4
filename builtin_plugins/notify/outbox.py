"""The durable outbox: notifications, their deliveries per surface, and the users' switches.

Every method is synchronous and runs on the trio thread against the kernel store (tables
``notify_*``, see ``schema.sql``). A notification and all of its deliveries are written in one
transaction, so a crash leaves either nothing or everything to deliver; a delivery is marked
``delivered`` only after its surface took it, so a crash in between delivers it again
(at-least-once).

Records returned:

* a *notification*: ``{"id", "user_id", "kind", "title", "body", "url", "urgency", "actions":
  [{"action", "title", "command"}], "ref", "created_at", "read_at"}``;
* a *delivery*: ``{"id", "notification_id", "surface", "target", "status", "attempts",
  "next_at" (UTC epoch s), "last_error", "created_at", "done_at"}``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from elowen_sdk import Store, utc_iso
from elowen_sdk.services.notify import NOTIFICATION_KINDS, Notification, NotificationAction

__all__ = ["OWN_SURFACES", "URGENCIES", "Outbox", "to_notification"]

URGENCIES = ("very-low", "low", "normal", "high")
"""RFC 8030 §5.3 ``Urgency`` values."""
OWN_SURFACES = ("web", "push")
"""The surfaces the plugin serves itself: ``web`` (the page's toast and list, the CLI's list)
and ``push`` (web push, one delivery per subscription)."""

_N_COLS = "id, user_id, kind, title, body, url, urgency, actions, ref, created_at, read_at"
_D_COLS = "id, notification_id, surface, target, status, attempts, next_at, last_error, created_at, done_at"


def _notification(row: dict[str, Any]) -> dict[str, Any]:
    row["actions"] = json.loads(row["actions"] or "[]")
    return row


def to_notification(row: Mapping[str, Any]) -> Notification:
    """The SDK record of a notification row."""
    actions = tuple(NotificationAction(a["action"], a["title"], a.get("command")) for a in row.get("actions") or ())
    return Notification(
        int(row["id"]),
        int(row["user_id"]),
        str(row["kind"]),
        str(row["title"]),
        str(row["body"]),
        row.get("url"),
        row["urgency"],
        str(row["created_at"]),
        actions,
    )


class Outbox:
    """Reads and writes the ``notify_*`` tables.

    Args:
        store: the kernel store.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    # ------------------------------------------------------------------ switches

    def enabled(self, user_id: int, kind: str, surface: str) -> bool:
        """Whether ``kind`` reaches ``user_id`` on ``surface`` (a row for the surface wins over
        the ``*`` row; no row: on)."""
        rows = self.store.query("SELECT surface, enabled FROM notify_prefs WHERE user_id = ? AND kind = ? AND surface IN (?, '*')", (user_id, kind, surface))
        by = {r["surface"]: bool(r["enabled"]) for r in rows}
        return by.get(surface, by.get("*", True))

    def prefs(self, user_id: int) -> dict[str, dict[str, bool]]:
        """``{kind: {surface: enabled}}`` for every kind (``"*"``: every surface); surfaces
        without a row are on."""
        out: dict[str, dict[str, bool]] = {k: {"*": True} for k in NOTIFICATION_KINDS}
        for r in self.store.query("SELECT kind, surface, enabled FROM notify_prefs WHERE user_id = ?", (user_id,)):
            out.setdefault(r["kind"], {})[r["surface"]] = bool(r["enabled"])
        return out

    def set_prefs(self, user_id: int, changes: Mapping[str, Mapping[str, bool]]) -> None:
        """Apply ``{kind: {surface: enabled}}`` (validated by the caller)."""
        with self.store.transaction():
            for kind, surfaces in changes.items():
                for surface, on in surfaces.items():
                    self.store.execute(
                        "INSERT INTO notify_prefs (user_id, kind, surface, enabled) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (user_id, kind, surface) DO UPDATE SET enabled = excluded.enabled",
                        (user_id, kind, surface, int(bool(on))),
                    )

    # ------------------------------------------------------------------ surfaces

    def known_surfaces(self) -> list[str]:
        """Every platform surface that ever registered, by name."""
        return [r["name"] for r in self.store.query("SELECT name FROM notify_surfaces ORDER BY name")]

    def surfaces(self) -> list[dict[str, Any]]:
        """``[{"name", "first_seen", "last_seen"}]``."""
        return self.store.query("SELECT name, first_seen, last_seen FROM notify_surfaces ORDER BY name")

    def saw_surface(self, name: str) -> None:
        """Record that surface ``name`` registered; its pending deliveries are due now (it is
        back: no need to wait out a backoff meant for it being down)."""
        now = utc_iso()
        self.store.execute("UPDATE notify_deliveries SET next_at = ? WHERE surface = ? AND status = 'pending'", (time.time(), name))
        self.store.execute(
            "INSERT INTO notify_surfaces (name, first_seen, last_seen) VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET last_seen = excluded.last_seen",
            (name, now, now),
        )

    # ------------------------------------------------------------------ notifications

    def create(
        self,
        user_id: int,
        kind: str,
        title: str,
        body: str,
        *,
        url: str | None,
        urgency: str,
        actions: Sequence[NotificationAction] = (),
        ref: str | None = None,
        push_targets: Iterable[int] = (),
        platforms: Iterable[str] = (),
    ) -> dict[str, Any] | None:
        """Store a notification and a pending delivery for each push subscription id in
        ``push_targets`` and each platform surface in ``platforms`` that the user has not
        switched off; returns the notification, or ``None`` when one with the same ``ref``
        already exists for this user (de-duplication) or the kind is off everywhere."""
        if not self.enabled(user_id, kind, "*") and not any(self.enabled(user_id, kind, s) for s in (*OWN_SURFACES, *platforms)):
            return None
        now, at = utc_iso(), time.time()
        acts = json.dumps([{"action": a.action, "title": a.title, "command": a.command} for a in actions])
        with self.store.transaction():
            nid = self.store.execute(
                "INSERT OR IGNORE INTO notify_notifications (user_id, kind, title, body, url, urgency, actions, ref, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (user_id, kind, title, body, url, urgency, acts, ref, now),
            )
            if not nid:
                return None
            rows: list[tuple[Any, ...]] = []
            if self.enabled(user_id, kind, "push"):
                rows += [(nid, "push", str(t), at, now) for t in push_targets]
            rows += [(nid, s, "", at, now) for s in platforms if self.enabled(user_id, kind, s)]
            self.store.executemany("INSERT INTO notify_deliveries (notification_id, surface, target, next_at, created_at) VALUES (?, ?, ?, ?, ?)", rows)
        return self.get(nid)

    def get(self, notification_id: int) -> dict[str, Any] | None:
        row = self.store.query_one(f"SELECT {_N_COLS} FROM notify_notifications WHERE id = ?", (notification_id,))
        return _notification(row) if row else None

    def list_for(self, user_id: int, *, before: int | None = None, unread: bool = False, kind: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Up to ``limit + 1`` notifications of ``user_id``, newest first, with ids below
        ``before``."""
        sql = f"SELECT {_N_COLS} FROM notify_notifications WHERE user_id = ? AND id < ?"
        params: list[Any] = [user_id, before if before is not None else 2**62]
        if unread:
            sql += " AND read_at IS NULL"
        if kind:
            sql += " AND kind = ?"
            params.append(kind)
        sql += " ORDER BY id DESC LIMIT ?"
        params.append(limit + 1)
        return [_notification(r) for r in self.store.query(sql, params)]

    def unread_count(self, user_id: int) -> int:
        row = self.store.query_one("SELECT COUNT(*) AS n FROM notify_notifications WHERE user_id = ? AND read_at IS NULL", (user_id,))
        return int(row["n"]) if row else 0

    def mark_read(self, user_id: int, notification_id: int | None = None) -> int:
        """Mark one notification (or, with ``None``, all) of ``user_id`` read; returns how many
        changed."""
        if notification_id is None:
            return int(self.store.execute("UPDATE notify_notifications SET read_at = ? WHERE user_id = ? AND read_at IS NULL", (utc_iso(), user_id)))
        return int(
            self.store.execute(
                "UPDATE notify_notifications SET read_at = ? WHERE id = ? AND user_id = ? AND read_at IS NULL", (utc_iso(), notification_id, user_id)
            )
        )

    # ------------------------------------------------------------------ deliveries

    def deliveries_of(self, notification_id: int) -> list[dict[str, Any]]:
        return self.store.query(f"SELECT {_D_COLS} FROM notify_deliveries WHERE notification_id = ? ORDER BY id", (notification_id,))

    def deliveries(self, *, user_id: int | None, status: str | None, before: int | None, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit + 1`` deliveries (of ``user_id``'s notifications, or all with ``None``),
        newest first."""
        sql = f"SELECT d.{_D_COLS.replace(', ', ', d.')}, n.user_id FROM notify_deliveries d JOIN notify_notifications n ON n.id = d.notification_id WHERE d.id < ?"
        params: list[Any] = [before if before is not None else 2**62]
        if user_id is not None:
            sql += " AND n.user_id = ?"
            params.append(user_id)
        if status:
            sql += " AND d.status = ?"
            params.append(status)
        sql += " ORDER BY d.id DESC LIMIT ?"
        params.append(limit + 1)
        return self.store.query(sql, params)

    def due(self, surfaces: Iterable[str], now: float, *, exclude: Iterable[int] = (), limit: int = 50) -> list[dict[str, Any]]:
        """Pending deliveries to the given surfaces whose time has come, oldest first, with
        their notification (key ``notification``)."""
        names = list(surfaces)
        if not names:
            return []
        skip = list(exclude)
        sql = (
            f"SELECT {_D_COLS} FROM notify_deliveries WHERE status = 'pending' AND next_at <= ? AND surface IN ({','.join('?' * len(names))})"
            + (f" AND id NOT IN ({','.join('?' * len(skip))})" if skip else "")
            + " ORDER BY id LIMIT ?"
        )
        rows = self.store.query(sql, [now, *names, *skip, limit])
        out = []
        for row in rows:
            row["notification"] = self.get(row["notification_id"])
            if row["notification"] is not None:
                out.append(row)
        return out

    def next_due(self, surfaces: Iterable[str]) -> float | None:
        """The earliest ``next_at`` of a pending delivery to these surfaces, or ``None``."""
        names = list(surfaces)
        if not names:
            return None
        row = self.store.query_one(
            f"SELECT MIN(next_at) AS t FROM notify_deliveries WHERE status = 'pending' AND surface IN ({','.join('?' * len(names))})", names
        )
        return float(row["t"]) if row and row["t"] is not None else None

    def done(self, delivery_id: int, status: str, error: str | None = None) -> None:
        """Mark a delivery ``delivered``, ``skipped`` or ``failed``."""
        self.store.execute(
            "UPDATE notify_deliveries SET status = ?, last_error = ?, done_at = ?, attempts = attempts + 1 WHERE id = ? AND status = 'pending'",
            (status, error, utc_iso(), delivery_id),
        )

    def retry(self, delivery_id: int, error: str, next_at: float) -> None:
        """Record a failed attempt; the delivery is due again at ``next_at`` (epoch s)."""
        self.store.execute(
            "UPDATE notify_deliveries SET attempts = attempts + 1, last_error = ?, next_at = ? WHERE id = ? AND status = 'pending'",
            (error, next_at, delivery_id),
        )

    def expire(self, older_than: float) -> int:
        """Fail pending deliveries created before ``older_than`` (epoch s) whose surface never
        came back; returns how many."""
        cutoff = utc_iso(older_than)
        return int(
            self.store.execute(
                "UPDATE notify_deliveries SET status = 'failed', last_error = COALESCE(last_error || '; ', '') || 'expired: the surface did not take it in time', "
                "done_at = ? WHERE status = 'pending' AND created_at < ?",
                (utc_iso(), cutoff),
            )
        )

    # ------------------------------------------------------------------ push subscriptions

    def subscribe(self, user_id: int, endpoint: str, p256dh: str, auth: str, device: str) -> dict[str, Any]:
        """Add (or, for a known endpoint, take over and refresh) a push subscription."""
        self.store.execute(
            "INSERT INTO notify_push_subscriptions (user_id, endpoint, p256dh, auth, device, created_at) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (endpoint) DO UPDATE SET user_id = excluded.user_id, p256dh = excluded.p256dh, auth = excluded.auth, device = excluded.device",
            (user_id, endpoint, p256dh, auth, device, utc_iso()),
        )
        row = self.store.query_one("SELECT * FROM notify_push_subscriptions WHERE endpoint = ?", (endpoint,))
        assert row is not None
        return row

    def subscriptions(self, user_id: int | None = None) -> list[dict[str, Any]]:
        if user_id is None:
            return self.store.query("SELECT * FROM notify_push_subscriptions ORDER BY id")
        return self.store.query("SELECT * FROM notify_push_subscriptions WHERE user_id = ? ORDER BY id", (user_id,))

    def subscription(self, subscription_id: int) -> dict[str, Any] | None:
        return self.store.query_one("SELECT * FROM notify_push_subscriptions WHERE id = ?", (subscription_id,))

    def unsubscribe(self, subscription_id: int, *, reason: str = "unsubscribed") -> bool:
        """Delete a subscription and fail its pending deliveries with ``reason``."""
        with self.store.transaction():
            self.store.execute(
                "UPDATE notify_deliveries SET status = 'failed', last_error = ?, done_at = ? WHERE surface = 'push' AND target = ? AND status = 'pending'",
                (reason, utc_iso(), str(subscription_id)),
            )
            return bool(self.store.execute("DELETE FROM notify_push_subscriptions WHERE id = ?", (subscription_id,)))

    def push_ok(self, subscription_id: int) -> None:
        self.store.execute("UPDATE notify_push_subscriptions SET last_ok_at = ? WHERE id = ?", (utc_iso(), subscription_id))
