"""The ``notify`` service (contract :class:`elowen_sdk.services.notify.NotifyService`).

``notify`` stores the notification and its deliveries (:class:`~.outbox.Outbox`), publishes
``notify.created`` for the user's open pages (private to them through ``audience``) and wakes
the delivery worker; it returns before anything is delivered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import trio

from elowen_sdk.errors import UserNotFound
from elowen_sdk.services.notify import NOTIFICATION_KINDS, NotificationAction, NotifySurface

from .dispatch import Dispatcher
from .outbox import URGENCIES, Outbox

__all__ = ["Notifier"]

log = logging.getLogger("elowen.plugin.notify")

MAX_TITLE = 200
MAX_BODY = 4000


class Notifier:
    """Implements ``NotifyService`` over an outbox and a dispatcher.

    Args:
        outbox: the store of notifications.
        dispatcher: the delivery worker (also the surface registry).
        users: returns the users service (``UsersService``) or ``None``.
        publish: ``publish(type, data)`` on the event bus.
    """

    def __init__(self, outbox: Outbox, dispatcher: Dispatcher, users: Callable[[], Any], publish: Callable[[str, dict[str, Any]], Any]) -> None:
        self.outbox = outbox
        self.dispatcher = dispatcher
        self.users = users
        self.publish = publish

    async def notify(self, user_id: int, title: str, body: str, *, url: str | None = None, urgency: str = "normal", kind: str = "message") -> int:
        return self.create(user_id, kind, title, body, url=url, urgency=urgency)

    def create(
        self,
        user_id: int,
        kind: str,
        title: str,
        body: str,
        *,
        url: str | None = None,
        urgency: str = "normal",
        actions: Sequence[NotificationAction] = (),
        ref: str | None = None,
    ) -> int:
        """The synchronous core of :meth:`notify` (the fan-out calls it from ``on_event``);
        ``ref`` de-duplicates. Returns the id, ``0`` when nothing was stored (switched off, or a
        duplicate ``ref``).

        Raises:
            LookupError (``UserNotFound``): no such user.
            ValueError: an empty title, an unknown urgency or kind, a url that is neither a
                path nor an http(s) URL.
        """
        if not isinstance(title, str) or not title.strip():
            raise ValueError("title: a non-empty string")
        if urgency not in URGENCIES:
            raise ValueError(f"urgency: one of {', '.join(URGENCIES)}, not {urgency!r}")
        if kind not in NOTIFICATION_KINDS:
            raise ValueError(f"kind: one of {', '.join(NOTIFICATION_KINDS)}, not {kind!r}")
        if url is not None and not (isinstance(url, str) and (url.startswith("/") and not url.startswith("//") or url.startswith(("https://", "http://")))):
            raise ValueError("url: a path of the web UI (/escalations) or an http(s) URL")
        users = self.users()
        if users is None or users.user(int(user_id)) is None:
            raise UserNotFound(f"no user {user_id}")
        subs = [s["id"] for s in self.outbox.subscriptions(int(user_id))] if self.dispatcher.vapid is not None else []
        row = self.outbox.create(
            int(user_id),
            kind,
            title.strip()[:MAX_TITLE],
            str(body or "")[:MAX_BODY],
            url=url,
            urgency=urgency,
            actions=actions,
            ref=ref,
            push_targets=subs,
            platforms=self.outbox.known_surfaces(),
        )
        if row is None:
            return 0
        if self.outbox.enabled(row["user_id"], kind, "web"):
            self.publish("notify.created", {"notification": row, "unread": self.outbox.unread_count(row["user_id"]), "audience": [row["user_id"]]})
        self.dispatcher.poke()
        return int(row["id"])

    def register_surface(self, surface: NotifySurface) -> None:
        _on_trio_thread(self.dispatcher.register, surface)

    def unregister_surface(self, name: str) -> None:
        _on_trio_thread(self.dispatcher.unregister, name)


def _on_trio_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` on the trio thread: a third-party plugin's sync ``on_load`` runs in
    a worker thread, and the store and trio events may only be used from the trio thread."""
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return trio.from_thread.run_sync(fn, *args)
    return fn(*args)
