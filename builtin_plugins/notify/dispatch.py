"""The delivery worker: takes due deliveries from the outbox and hands each to its surface.

One task per enable of the plugin (started in its nursery, so disabling the plugin stops it).
It wakes when something was queued (:meth:`Dispatcher.poke`), when a surface registers, or at
the next due retry, and at least every ``idle_wake`` seconds. Each delivery runs under
``delivery_timeout`` seconds, at most ``concurrency`` at once; a failed attempt is retried after
``backoff_base · 2^(attempts−1)`` seconds (capped at ``backoff_max``) until ``max_attempts``,
then the delivery is ``failed``. Deliveries to a surface that is not registered wait (no
attempt is spent) until it registers or ``pending_ttl`` runs out.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import trio

from elowen_sdk.services.notify import NotifySurface

from .outbox import OWN_SURFACES, Outbox, to_notification
from .webpush import PushResult, VapidKey, encode_message, send

__all__ = ["SURFACE_NAME", "DispatchConfig", "Dispatcher", "push_message"]

log = logging.getLogger("elowen.plugin.notify.dispatch")

SURFACE_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")
"""What a platform surface may be called."""


def push_message(row: dict[str, Any]) -> dict[str, Any]:
    """The JSON a web push carries for notification ``row`` (read by ``sw.js``): ``{"id",
    "kind", "title", "body", "url", "urgency", "tag", "actions": [{"action", "title"}],
    "created_at"}``."""
    return {
        "id": row["id"],
        "kind": row["kind"],
        "title": row["title"][:120],
        "body": row["body"],
        "url": row["url"],
        "urgency": row["urgency"],
        "tag": f"elowen-{row['id']}",
        "actions": [{"action": a["action"], "title": a["title"]} for a in row["actions"]],
        "created_at": row["created_at"],
    }


@dataclass(frozen=True, slots=True)
class DispatchConfig:
    """The worker's limits (the plugin's config; seconds unless said)."""

    max_attempts: int = 8
    backoff_base: float = 5.0
    backoff_max: float = 600.0
    delivery_timeout: float = 30.0
    pending_ttl: float = 86400.0
    concurrency: int = 8
    idle_wake: float = 30.0
    push_ttl: int = 86400

    @classmethod
    def from_mapping(cls, config: Any) -> DispatchConfig:
        coerce: dict[str, Any] = {f.name: type(f.default) for f in dataclasses.fields(cls)}  # int or float
        return cls(**{name: kind(config[name]) for name, kind in coerce.items() if name in config})

    def backoff(self, attempts: int) -> float:
        """Seconds before the next try after ``attempts`` failed ones (≥ 1)."""
        return float(min(self.backoff_max, self.backoff_base * math.pow(2, max(0, attempts - 1))))


class Dispatcher:
    """Delivers the outbox.

    Args:
        outbox: the plugin's :class:`Outbox`.
        config: limits.
        vapid: the instance's VAPID key (``None``: web push off).
        client: the HTTP client push requests go through.
        clock: epoch seconds (``time.time``; a test may pass its own).
    """

    def __init__(
        self, outbox: Outbox, config: DispatchConfig, vapid: VapidKey | None, client: httpx.AsyncClient, clock: Callable[[], float] = time.time
    ) -> None:
        self.outbox = outbox
        self.config = config
        self.vapid = vapid
        self.client = client
        self.clock = clock
        self.surfaces: dict[str, NotifySurface] = {}
        self._wake = trio.Event()
        self._in_flight: set[int] = set()
        self.rounds = 0
        """Completed passes over the outbox (for ``GET /notifications/surfaces`` and tests)."""

    # ------------------------------------------------------------------ surfaces

    def register(self, surface: NotifySurface) -> None:
        name = getattr(surface, "name", None)
        if not isinstance(name, str) or not SURFACE_NAME.fullmatch(name):
            raise ValueError(f"surface name {name!r}: [a-z][a-z0-9_-]*, at most 40 characters")
        if name in OWN_SURFACES:
            raise ValueError(f"surface name {name!r} is the notify plugin's own")
        if not callable(getattr(surface, "deliver", None)):
            raise ValueError(f"surface {name!r} has no deliver(notification) method")
        self.surfaces[name] = surface
        self.outbox.saw_surface(name)
        log.info("surface %s registered", name)
        self.poke()

    def unregister(self, name: str) -> None:
        if self.surfaces.pop(name, None) is not None:
            log.info("surface %s unregistered; its deliveries wait for it", name)

    def active(self) -> list[str]:
        """Surfaces deliveries can go to now."""
        return [*(["push"] if self.vapid is not None else []), *self.surfaces]

    def poke(self) -> None:
        """Something is due: run a pass now."""
        self._wake.set()

    # ------------------------------------------------------------------ the loop

    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        limiter = trio.CapacityLimiter(self.config.concurrency)
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                self._wake = trio.Event()
                expired = self.outbox.expire(self.clock() - self.config.pending_ttl)
                if expired:
                    log.warning("%d deliveries expired: their surface did not take them within %.0f s", expired, self.config.pending_ttl)
                # keep at most two rounds of work started: a backlog of thousands stays in the store
                room = 2 * self.config.concurrency - len(self._in_flight)
                for delivery in self.outbox.due(self.active(), self.clock(), exclude=self._in_flight, limit=room) if room > 0 else ():
                    self._in_flight.add(delivery["id"])
                    nursery.start_soon(self._one, delivery, limiter)
                self.rounds += 1
                nxt = self.outbox.next_due(self.active())
                wait = self.config.idle_wake if nxt is None else max(0.05, min(self.config.idle_wake, nxt - self.clock()))
                with trio.move_on_after(wait):
                    await self._wake.wait()

    async def _one(self, delivery: dict[str, Any], limiter: trio.CapacityLimiter) -> None:
        try:
            async with limiter:
                error: str | None = None
                outcome = "retry"
                with trio.move_on_after(self.config.delivery_timeout) as scope:
                    try:
                        outcome, error = await self._attempt(delivery)
                    except Exception as exc:  # a surface's failure is data: recorded, retried
                        outcome, error = "retry", f"{type(exc).__name__}: {exc}"[:300]
                if scope.cancelled_caught:
                    outcome, error = "retry", f"timed out after {self.config.delivery_timeout:g} s"
                self._record(delivery, outcome, error)
        finally:
            self._in_flight.discard(delivery["id"])
            self.poke()

    def _record(self, delivery: dict[str, Any], outcome: str, error: str | None) -> None:
        did = delivery["id"]
        if outcome == "wait":
            return
        if outcome in ("delivered", "skipped", "failed"):
            self.outbox.done(did, outcome, error)
            if outcome == "failed":
                log.warning("delivery %s of notification %s to %s failed: %s", did, delivery["notification_id"], delivery["surface"], error)
            return
        attempts = int(delivery["attempts"]) + 1
        if attempts >= self.config.max_attempts:
            self.outbox.done(did, "failed", f"gave up after {attempts} attempts: {error}")
            log.warning("delivery %s to %s failed after %d attempts: %s", did, delivery["surface"], attempts, error)
        else:
            self.outbox.retry(did, error or "failed", self.clock() + self.config.backoff(attempts))

    async def _attempt(self, delivery: dict[str, Any]) -> tuple[str, str | None]:
        """One try; ``(outcome, error)`` with outcome ``delivered``/``skipped``/``failed``/``retry``."""
        row = delivery["notification"]
        surface = delivery["surface"]
        if surface == "push":
            return await self._push(delivery, row)
        target = self.surfaces.get(surface)
        if target is None:  # unregistered meanwhile: not an attempt
            return "wait", None
        took = await target.deliver(to_notification(row))
        return ("delivered", None) if took is not False else ("skipped", "no address for this user on this surface")

    async def _push(self, delivery: dict[str, Any], row: dict[str, Any]) -> tuple[str, str | None]:
        assert self.vapid is not None
        sub = self.outbox.subscription(int(delivery["target"]))
        if sub is None or sub["user_id"] != row["user_id"]:
            return "skipped", "the subscription was removed"
        payload = encode_message(push_message(row))
        result: PushResult = await send(self.client, self.vapid, sub, payload, ttl=self.config.push_ttl, urgency=row["urgency"])
        if result.outcome == "delivered":
            self.outbox.push_ok(sub["id"])
            return "delivered", None
        if result.outcome == "gone":
            self.outbox.unsubscribe(sub["id"], reason=f"subscription expired ({result.detail})")
            log.info("push subscription %s of user %s expired (%s): removed", sub["id"], sub["user_id"], result.status)
            return "failed", f"subscription expired ({result.detail})"
        return result.outcome, result.detail
