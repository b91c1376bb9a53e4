"""The ``notify`` service: proactive fan-out to every surface a user reads (offered by a
``notify`` plugin).

A consumer declares ``service:notify`` and asks ``notify = ctx.service(NotifyService)``. One
call reaches every surface the user enabled (the web UI, web push, the CLI's notification
list, linked chat platforms); delivery is at-least-once through a durable outbox, so the call
returns once the notification is stored, not once it is delivered.

A chat platform (or any plugin) that can reach people becomes a *surface*: it hands the service
an object satisfying :class:`NotifySurface` (``register_surface``) when both are enabled, and
receives each notification of a user as a :class:`Notification`. See ``docs/notifications.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from ..contracts import service_contract

__all__ = ["NOTIFICATION_KINDS", "Notification", "NotificationAction", "NotifyService", "NotifySurface", "Urgency"]

NOTIFICATION_KINDS: tuple[str, ...] = ("escalation", "task", "goal", "cron", "platform", "message")
"""What a notification is about; each kind is switched on or off per user and surface.

``escalation``: a decision or tool call waiting for this user; ``task``: a task of theirs closed
or blocked; ``goal``: a goal paused (budget, blocker, lost driver); ``cron``: a scheduled
prompt's result; ``platform``: a plugin or chat adapter down (admins); ``message``: anything
else (the default)."""

Urgency = Literal["very-low", "low", "normal", "high"]
"""How urgent a notification is; the values of Web Push's ``Urgency`` header (RFC 8030 §5.3),
which surfaces without such a notion map to their own (e.g. a sound only for ``high``)."""


@dataclass(frozen=True, slots=True)
class NotificationAction:
    """A button a surface may show with a notification (Allow / Reject of an escalation).

    Attributes:
        action: a short machine name (``approve``, ``reject``).
        title: the button's label (``Allow``).
        command: the chat text that carries the action out in a conversation
            (``/allow 12``), or ``None`` where none exists.
    """

    action: str
    title: str
    command: str | None = None


@dataclass(frozen=True, slots=True)
class Notification:
    """One notification as a surface receives it.

    Attributes:
        id: its id (also the key of ``GET /notifications/{id}``).
        user_id: the person it is for (the surface maps it to its own address).
        kind: one of :data:`NOTIFICATION_KINDS`.
        title: one short line; body: plain text, a few lines.
        url: a path of the web UI or an absolute URL, or ``None``.
        urgency: see :data:`Urgency`.
        created_at: UTC ISO 8601.
        actions: buttons the surface may offer (see :class:`NotificationAction`).
    """

    id: int
    user_id: int
    kind: str
    title: str
    body: str
    url: str | None
    urgency: Urgency
    created_at: str
    actions: tuple[NotificationAction, ...] = ()


class NotifySurface(Protocol):
    """What a plugin hands :meth:`NotifyService.register_surface` to receive notifications.

    Attributes:
        name: the surface's stable name (``discord``), ``[a-z][a-z0-9_-]*``, at most 40
            characters; ``web`` and ``push`` are the service's own. Deliveries are kept per
            name, so a surface that is down (unregistered) gets what it missed when it
            registers again under the same name.
    """

    name: str

    async def deliver(self, notification: Notification) -> bool:
        """Deliver ``notification`` to its user; returns ``True`` once it was handed to the
        outside service, ``False`` when this user has no address on this surface (not linked:
        recorded as ``skipped``, never retried).

        Raising anything (the outside service is down, a timeout) records the error and
        retries later with backoff, up to the service's attempt limit, then the delivery is
        ``failed`` (visible in ``GET /notifications/deliveries``). A call is cancelled after
        the service's delivery timeout (30 s by default). Delivery is at-least-once: the same
        notification may come twice after a crash, so a surface that must not show a duplicate
        keeps the ids it delivered.
        """
        ...


@service_contract("notify")
class NotifyService(Protocol):
    """Proactive notifications (service ``"notify"``)."""

    async def notify(self, user_id: int, title: str, body: str, *, url: str | None = None, urgency: Urgency = "normal", kind: str = "message") -> int:
        """Queue a notification for ``user_id`` on every surface they enabled; returns its id
        (``0`` when the user switched this ``kind`` off everywhere: nothing is stored).

        Args:
            title: one short line (surfaces may cut it at about 60 characters).
            body: plain text, a few lines at most.
            url: a path of the web UI (``/escalations/12``) or an absolute URL, opened when the
                notification is clicked; ``None``: none.
            urgency: see :data:`Urgency`.
            kind: one of :data:`NOTIFICATION_KINDS` (a cron result passes ``"cron"``).

        The caller decides who may see what: notify only a user allowed to see the thing.

        Raises:
            LookupError: no such user.
            ValueError: an empty title, an unknown urgency or an unknown kind.
        """
        ...

    def register_surface(self, surface: NotifySurface) -> None:
        """Start delivering to ``surface`` (see :class:`NotifySurface`): what is pending for
        its name is delivered now, new notifications from then on. A surface registered again
        under the same name replaces the earlier object.

        Call it from ``on_load`` (when ``ctx.service(NotifyService)`` answers) and from
        ``on_service("notify", True)`` — from any thread: a third-party plugin's sync hooks
        run in a worker thread and the call is carried to the trio thread. ``deliver`` is then
        awaited on the trio thread, in the notify plugin's worker. The registration lasts until
        :meth:`unregister_surface` or until the notify plugin is disabled.

        Raises:
            ValueError: a bad name, or one of the service's own (``web``, ``push``).
        """
        ...

    def unregister_surface(self, name: str) -> None:
        """Stop delivering to surface ``name`` (call it from ``on_unload``); its deliveries stay
        pending until it comes back or they expire. Unknown names are ignored."""
        ...
