"""The structured permission channel: a CLI's permission request that arrives as data (Claude
Code's ``PermissionRequest`` hook posting to ``POST /agent/permission``) instead of being read
off its screen.

A request becomes the same decision as a screen prompt — kind ``prompt``, payload ``state``
``permission_prompt`` with the exact request (:func:`elowen_sdk.screen.normalize_request` of
the tool and input the CLI sent: command, file, diff…; ``complete`` when its kind's parts are
there) — published as ``decision.created``, so the overseer, the autonomy levels, the
destructive rule and escalations apply unchanged. Its payload carries ``channel`` (the channel's
name, ``"hook"`` or ``"mcp"``): :meth:`~.decide.Decisions.decide` then settles it without
sending keys, and the verdict goes back as the HTTP reply the request is waiting on.

One prompt, one decision (no double answer). The CLI draws its own dialog while the request
waits (Claude Code 2.1.197 runs the hook and the dialog side by side; the first answer wins),
so the deriver sees the same prompt on screen:

* request first: the deriver's ``create`` for that session returns the open channel decision
  (the screen's fingerprint is merged into it) instead of a new one; no keys are ever sent for
  it;
* screen first: the request takes over the open screen decision of the same request
  (:func:`same_request`; same id; its payload gets the exact request and ``channel``) unless its
  keys are being sent already; a dialog that asks for something else is never lent the
  channel's request (the request gets a decision of its own).

When the wait ends without a verdict (:attr:`~.config.AgentsConfig.channel_wait`, or the
request's connection goes away) the decision stays open as a plain screen decision (``channel``
removed) if the deriver linked it to the dialog on screen, else it expires; the CLI, given no
verdict, leaves its dialog to the screen path.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import trio

from elowen_sdk.screen import normalize_request

from .decisions import OPEN, DecisionStore

__all__ = ["CHANNEL_POLL", "RECENT", "PermissionChannel", "Verdict", "same_request"]

log = logging.getLogger("elowen.plugin.agents")

CHANNEL_POLL = 0.25
"""Seconds between looks at a waiting channel decision's row (a verdict given through
:meth:`~.decide.Decisions.decide` wakes the waiter at once; this catches the others: expiry by
the deriver, the session ending)."""

Verdict = tuple[str, str | None, dict[str, Any] | None]
"""``(verdict, message, decision)``: ``"allow"``, ``"deny"`` (``message`` the reason) or
``"none"`` (no verdict: the CLI's own dialog takes over), and the decision (``None`` when
none was made)."""

RECENT = 5.0
"""Seconds after a channel verdict during which the same request drawn on screen is still
that decision (the CLI redraws before it applies the verdict)."""

SCREEN_KEYS = ("fingerprint", "state", "instance", "options", "numbers")
"""Payload keys a screen decision contributes to the channel decision it is merged into."""


class PermissionChannel:
    """Channel decisions of the agents plugin (used by :class:`~.decide.Decisions`).

    Args:
        store: the decision store.
        answering: ids of decisions whose keys are being sent right now (owned by
            :class:`~.decide.Decisions`).
        reject_reason: ``reject_reason(decision)`` → the reason a rejection tells the agent.
    """

    def __init__(self, store: DecisionStore, answering: set[int], reject_reason: Callable[[Mapping[str, Any]], str]) -> None:
        self.store = store
        self._answering = answering
        self._reject_reason = reject_reason
        self._events: dict[int, trio.Event] = {}
        self._recent: dict[str, list[dict[str, Any]]] = {}
        self._waiting: set[int] = set()
        """Decisions whose request is waiting in this process (none survive a restart)."""

    def is_waiting(self, decision_id: int) -> bool:
        """Whether a channel request waits for ``decision_id``'s verdict in this process (a
        channel decision nobody waits for — the daemon restarted — is answered on screen)."""
        return decision_id in self._waiting

    # ------------------------------------------------------------------ screen side

    def open_channel_decision(self, session: str, payload: Mapping[str, Any]) -> dict[str, Any] | None:
        """For the deriver's ``create`` of a screen ``prompt`` on ``session``: the channel
        decision of that session for the same request — open, or answered through the channel
        less than :data:`RECENT` seconds ago (the CLI may still be drawing the dialog the verdict
        dismisses) — with the screen's fingerprint merged into its payload; ``None`` when there
        is none (a new screen decision is made)."""
        now = time.time()
        open_ = [d for d in self.store.open_for_session(session, kind="prompt") if d["payload"].get("channel")]
        # open decisions first, newest first; then those answered a moment ago (a retry of the
        # same request must link to its own open decision, not to the settled one before it)
        for d in [*reversed(open_), *reversed(self._recent.get(session, []))]:
            p = d["payload"]
            fp = payload.get("fingerprint")
            if p.get("fingerprint") not in (None, fp) or not same_request(payload.get("request"), p.get("request")):
                continue  # another prompt instance or another request
            if d["status"] not in OPEN and now - float((d.get("answer") or {}).get("sent_at") or 0) > RECENT:
                continue
            merged = {**p, **{k: payload[k] for k in SCREEN_KEYS if k in payload}, "screen_request": payload.get("request")}
            if d["status"] in OPEN:
                self.store.repoint(int(d["id"]), merged)
            else:
                self._recent[session] = [r for r in self._recent.get(session, []) if r["id"] != d["id"]]
            log.info("%s: the prompt on screen is decision %s of the permission channel; no second decision", session, d["id"])
            return self.store.get(int(d["id"]))
        return None

    def answered(self, decision: Mapping[str, Any]) -> None:
        """Remember a channel decision just answered (see :meth:`open_channel_decision`)."""
        name = str(decision.get("session") or "")
        now = time.time()
        keep = [r for r in self._recent.get(name, []) if now - float((r.get("answer") or {}).get("sent_at") or 0) <= RECENT]
        self._recent[name] = [*keep, dict(decision)]

    # ------------------------------------------------------------------ channel side

    def open_request(
        self, *, task_id: int, session: str, raw: Mapping[str, Any], channel: str, cli: str, cwd: str | None, home: str | None, extra: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """The decision for a request that just arrived: an open screen decision of
        ``session`` taken over, else a new one (``decision.created``). ``None`` when the
        screen decision's keys are being sent right now (the screen answers this prompt)."""
        request = normalize_request(raw, cwd=cwd, home=home)
        payload: dict[str, Any] = {
            "state": "permission_prompt",
            "request": request,
            "options": [],
            "numbers": [],
            "fingerprint": None,
            "cli": cli,
            "channel": channel,
            **dict(extra),
            "detected_at": time.time(),
        }
        for d in reversed(self.store.open_for_session(session, kind="prompt")):
            if d["payload"].get("channel"):
                continue
            if not same_request(d["payload"].get("request"), request):
                continue  # the dialog on screen asks for something else: never lend it this request
            if int(d["id"]) in self._answering:
                log.info("%s: decision %s is being answered on screen; the channel leaves it", session, d["id"])
                return None
            screen = d["payload"]
            merged = {**payload, **{k: screen[k] for k in SCREEN_KEYS if k in screen}, "screen_request": screen.get("request")}
            self._waiting.add(int(d["id"]))
            self.store.repoint(int(d["id"]), merged)
            log.info("%s: the permission channel takes over screen decision %s", session, d["id"])
            return self.store.get(int(d["id"]))
        decision = self.store.create("prompt", task_id=task_id, session=session, payload=payload)
        self._waiting.add(int(decision["id"]))
        return decision

    def wake(self, decision_id: int) -> None:
        """A verdict was given for ``decision_id``: wake its waiter."""
        event = self._events.get(decision_id)
        if event is not None:
            event.set()

    async def wait(self, decision_id: int, timeout: float) -> Verdict:
        """Wait up to ``timeout`` seconds for the verdict on ``decision_id`` (escalations
        keep waiting). On timeout or cancellation the decision is handed back to the screen
        (:meth:`release`)."""
        verdict: Verdict | None = None
        try:
            with trio.move_on_after(timeout):
                while verdict is None:
                    event = self._events[decision_id] = trio.Event()
                    verdict = self.verdict(decision_id)
                    if verdict is None:
                        with trio.move_on_after(CHANNEL_POLL):
                            await event.wait()
        finally:
            self._events.pop(decision_id, None)
            self._waiting.discard(decision_id)
            if verdict is None:
                with trio.CancelScope(shield=True):
                    self.release(decision_id)
        return verdict or ("none", None, self.store.get(decision_id))

    def verdict(self, decision_id: int) -> Verdict | None:
        """The verdict of a settled decision, ``None`` while it is open."""
        d = self.store.get(decision_id)
        if d is None:
            return ("none", None, None)
        status = d["status"]
        if status in OPEN:
            return None
        if status == "approved":
            return ("allow", None, d)
        if status == "rejected":
            return ("deny", self._reject_reason(d), d)
        return ("none", None, d)  # expired: the prompt was answered elsewhere or the agent ended

    def release(self, decision_id: int) -> None:
        """No verdict reached the channel: the decision goes on as a screen decision when
        the deriver linked it to the dialog on screen (``channel`` removed, its ``request``
        the screen's again with the channel's kept as ``channel_request``; its keys are then
        sent as for any prompt), else it expires."""
        d = self.store.get(decision_id)
        if d is None or d["status"] not in OPEN or not d["payload"].get("channel"):
            return
        payload = dict(d["payload"])
        if payload.get("fingerprint"):
            payload["released_channel"] = payload.pop("channel")
            # answered on screen from now on: judged on what the screen shows (a command cut
            # short there is incomplete, so never approved automatically), not on the channel's
            # request the keys no longer answer; a screen whose request was not read is unknown
            payload["channel_request"] = payload.get("request")
            screen = payload.get("screen_request")
            payload["request"] = dict(screen) if isinstance(screen, Mapping) else {"kind": "other", "complete": False, "missing": ["request"]}
            self.store.repoint(decision_id, payload)
            log.info("decision %s: no verdict through the channel in time; it is answered on screen", decision_id)
        else:
            self.store.settle(decision_id, "expired", decided_by="elowen:channel", rationale="no verdict within the permission channel's wait")


_WS = re.compile(r"[ \t]+")
"""Runs of spaces and tabs (a line break is kept: it separates commands)."""


def same_request(screen: Any, channel: Any) -> bool:
    """Whether a request read off the screen is the one a channel request names: same kind,
    and for a shell command the same command (spaces aside, line breaks kept; a prefix only where
    the screen shows it cut short — ``complete`` false or ending in ``…``), for edits the same
    paths, for MCP tools the same server and tool, for URLs and directories shown whole the same
    one. Other shapes match on kind alone (a false match is caught later: a verdict is carried
    out only for the request it judged, see the overseer's ``apply``)."""
    if not isinstance(screen, Mapping) or not isinstance(channel, Mapping):
        return True
    if screen.get("kind") and channel.get("kind") and screen.get("kind") != channel.get("kind"):
        return False
    kind = channel.get("kind")
    if kind == "bash" and screen.get("command") and channel.get("command"):
        raw_shown = _commands(screen["command"])
        shown = raw_shown.rstrip("…").strip()
        full = _commands(channel["command"])
        if screen.get("complete") is False or raw_shown != shown:
            # cut short on screen (wrapped lines are joined with spaces there): a prefix, read
            # with line breaks as spaces
            return full.replace("\n", " ").startswith(shown.replace("\n", " "))
        return full == shown
    if kind in ("edit", "write", "patch") and screen.get("paths") and channel.get("paths"):
        return set(screen["paths"]) == set(channel["paths"])
    if kind == "mcp" and screen.get("server") and channel.get("server"):
        shown_tool, tool = str(screen.get("tool") or ""), str(channel.get("tool") or "")
        if shown_tool and tool and tool.rsplit("__", 1)[-1] != shown_tool.rsplit("__", 1)[-1]:
            return False
        return bool(screen["server"] == channel["server"])
    whole = screen.get("complete") is not False
    for key in ("url", "directory"):
        if whole and screen.get(key) and channel.get(key) and str(screen[key]).rstrip("/") != str(channel[key]).rstrip("/"):
            return False
    return True


def _commands(command: Any) -> str:
    """A shell command with each line's spaces and tabs collapsed (line breaks kept)."""
    return "\n".join(_WS.sub(" ", line).strip() for line in str(command).strip().split("\n"))
