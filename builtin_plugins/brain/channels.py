"""Channel turns: how chat platforms (a webhook, Discord, Matrix, …) reach the brain.

A plugin contributes a :class:`elowen_sdk.Platform` (``register_platforms``). For each one the
brain starts its adapter — ``adapter = factory(gateway)`` (sync or async) — where ``gateway``
is a :class:`ChannelGateway` bound to that platform; then, if the adapter has one, ``await
adapter.run()`` in the brain's nursery under the platform's own cancel scope. Disabling the
platform plugin (or the brain) cancels ``run`` and closes the gateway; a reconfigured plugin
contributes a new ``Platform`` object and gets a fresh adapter. ``run`` returning (or raising)
ends the platform too: its gateway closes until the plugin is enabled again. An optional
``aclose()`` (or ``close()``) on the adapter is called after ``run`` ends.

An adapter that cannot work as configured (a missing secret, say) may say so with two optional
attributes, read whenever the status is asked for: ``configured`` (``bool``; ``False`` shows the
platform with state ``not_configured``) and ``detail`` (``str | None``, the reason, shown as
``detail`` in :meth:`PlatformHost.status`). An adapter with a connection of its own may also
have ``state`` (``str``: ``connected``, ``reconnecting``, ``error``, …), shown while it runs.

The adapter speaks to the brain through one call::

    replies: list[str] = await gateway.turn(platform_user, text, projects=None)

``platform_user`` is the platform's stable id of the sender (a chat or user id; 1–200
characters), ``text`` the message (1–:data:`MAX_TEXT` characters). The replies are the texts to show the sender, in order.
``projects`` is the sender's effective project scope on the platform (an iterable of project
ids, e.g. from Discord roles): the turn the message starts sees only those of the linked
account's projects — the project list in its prompt, the path guard of the file and terminal
tools, ``tasks.create``, and the :class:`elowen_sdk.ToolCall` other plugins' tools get
(``projects``); a sub-agent it delegates to keeps the same narrowing. ``None`` (the default):
every project of the account, as on the web. The narrowing holds for that turn only (and its
goal turns); the web's turns on the same conversation are not narrowed.

* An **unlinked** sender gets one reply carrying a fresh **link code** (8 characters, shown as
  ``ABCD-EFGH``; valid :data:`CODE_TTL` seconds; single use; a new message replaces the old
  code). A signed-in Elowen user confirms it (``POST /brain/channels/link {"code"}`` or
  ``elowen chat --link CODE``); from then on the sender's messages are that user's turns.
* A **linked** sender's message is a pointer-based turn on the user's active conversation —
  the same conversation the web dock shows, through the same pipeline (slash commands, tools,
  approvals). The replies are the assistant's texts, command replies, errors and goal news.
* A tool call that needs approval (or an ``ask_user`` question) ends the call early: the last
  reply is the prompt with how to answer — ``/allow N``, ``/reject N`` or ``/answer N TEXT``.
  The turn waits; the sender's answer (through ``gateway.turn`` again) decides it and returns
  what the turn said next. Answering on the web instead works too; the rest of that turn is
  then shown on the web only.
* Channel commands: ``/allow N``, ``/reject N``, ``/answer N TEXT``, ``/abort`` (stop the
  running turn) and ``/unlink`` (forget the link). Everything else starting with ``/`` goes to
  the brain's own commands (``/goal …``, ``/yolo …``, ``/help``); ``/help`` over a channel
  also lists the channel commands.
* A failed turn (the model call failed, say) is reported as a plain sentence — ``Sorry, that
  did not work: <reason>.`` — without Python exception class names.

A call returns when the turn ends or waits for the user, which may take minutes (tool calls,
goal turns): adapters call it from their own task, never from a request handler that must
answer fast. It raises :class:`ChannelClosed` once the platform was stopped, and
:class:`ValueError` for a bad ``platform_user`` or ``text``.

Links live in ``brain_channel_links``, codes (SHA-256 of the code only) in
``brain_channel_codes``. Linking and unlinking are audited (``brain.channel.link`` /
``brain.channel.unlink``).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from elowen_sdk import ElowenError, Store, utc_iso

if TYPE_CHECKING:
    from .service import BrainService

__all__ = [
    "CODE_TTL",
    "ChannelClosed",
    "MAX_TEXT",
    "ChannelGateway",
    "ChannelLinks",
    "PlatformHost",
    "normalize_code",
    "plain_error",
    "run_channel_turn",
]

log = logging.getLogger("elowen.plugin.brain")

CODE_TTL = 600.0
"""Seconds a link code stays valid."""
CODE_LENGTH = 8
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: codes are read and typed by people
MAX_PLATFORM_USER = 200
MAX_TEXT = 8_000
"""Characters a channel message may have (longer ones raise :class:`ValueError`): a chat
message, not a document — a small local model's whole context is about 2,048 tokens."""
_CHANNEL_COMMANDS = frozenset({"/allow", "/reject", "/answer", "/abort", "/unlink"})


class ChannelClosed(ElowenError, RuntimeError):
    """The platform's adapter was stopped (its plugin or the brain was disabled)."""


def normalize_code(code: str) -> str:
    """A link code as stored: upper case, without spaces and dashes (``"abcd-efgh"`` →
    ``"ABCDEFGH"``)."""
    return "".join(ch for ch in code.upper() if ch not in " -\t")


def _hash(code: str) -> str:
    return hashlib.sha256(normalize_code(code).encode("utf-8")).hexdigest()


def _show(code: str) -> str:
    return f"{code[:4]}-{code[4:]}"


# --------------------------------------------------------------------------- links


class ChannelLinks:
    """The link table and the one-time link codes.

    Args:
        store: the kernel store (tables of the brain's ``schema.sql``, version ≥ 2).
        user_exists: whether an Elowen user id still exists (the users service).
        clock: wall-clock seconds since the epoch (code expiry).
    """

    def __init__(self, store: Store, *, user_exists: Callable[[int], bool], clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.user_exists = user_exists
        self.clock = clock

    def user_for(self, platform: str, platform_user: str) -> int | None:
        """The Elowen user id linked to the sender, or ``None``. A link to a deleted user is
        dropped (and ``None`` returned)."""
        row = self.store.query_one("SELECT user_id FROM brain_channel_links WHERE platform = ? AND platform_user = ?", (platform, platform_user))
        if row is None:
            return None
        if not self.user_exists(int(row["user_id"])):
            self.store.execute("DELETE FROM brain_channel_links WHERE platform = ? AND platform_user = ?", (platform, platform_user))
            return None
        return int(row["user_id"])

    def issue_code(self, platform: str, platform_user: str) -> str:
        """A fresh link code for the sender (``"ABCDEFGH"``); the sender's older codes and every
        expired code are deleted."""
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        now = self.clock()
        with self.store.transaction():
            self.store.execute("DELETE FROM brain_channel_codes WHERE expires_at <= ? OR (platform = ? AND platform_user = ?)", (now, platform, platform_user))
            self.store.execute(
                "INSERT INTO brain_channel_codes (code_hash, platform, platform_user, expires_at, created_at) VALUES (?, ?, ?, ?, ?)",
                (_hash(code), platform, platform_user, now + CODE_TTL, utc_iso()),
            )
        return code

    def confirm(self, code: str, user_id: int) -> dict[str, Any]:
        """Use ``code`` to link its sender to ``user_id`` (replacing an older link of that
        sender); the code is consumed. Returns the link ``{platform, platform_user, user_id,
        created_at}``.

        Raises:
            LookupError: no such code, it expired, or it was used already.
        """
        digest = _hash(code)
        with self.store.transaction():
            row = self.store.query_one("SELECT platform, platform_user, expires_at FROM brain_channel_codes WHERE code_hash = ?", (digest,))
            valid = row is not None and row["expires_at"] > self.clock()
            if row is not None:
                self.store.execute("DELETE FROM brain_channel_codes WHERE code_hash = ?", (digest,))  # used or expired: gone
            if valid:
                self.store.execute(
                    "INSERT OR REPLACE INTO brain_channel_links (platform, platform_user, user_id, created_at) VALUES (?, ?, ?, ?)",
                    (row["platform"], row["platform_user"], user_id, utc_iso()),
                )
        if not valid:
            raise LookupError("unknown or expired link code")
        return self.link(row["platform"], row["platform_user"])  # type: ignore[index,return-value]

    def link(self, platform: str, platform_user: str) -> dict[str, Any] | None:
        """One link record or ``None``."""
        return self.store.query_one(
            "SELECT platform, platform_user, user_id, created_at FROM brain_channel_links WHERE platform = ? AND platform_user = ?", (platform, platform_user)
        )

    def links(self, user_id: int) -> list[dict[str, Any]]:
        """A user's links ``{platform, platform_user, user_id, created_at}``, oldest first."""
        return self.store.query(
            "SELECT platform, platform_user, user_id, created_at FROM brain_channel_links WHERE user_id = ? ORDER BY created_at, platform", (user_id,)
        )

    def unlink(self, user_id: int, platform: str, platform_user: str) -> bool:
        """Remove the user's link of that sender; ``False`` when there was none."""
        return (
            self.store.execute("DELETE FROM brain_channel_links WHERE user_id = ? AND platform = ? AND platform_user = ?", (user_id, platform, platform_user))
            > 0
        )


# --------------------------------------------------------------------------- reply texts


def link_prompt(code: str) -> str:
    """What an unlinked sender is told."""
    minutes = int(CODE_TTL // 60)
    return (
        f"This chat is not linked to an Elowen user yet. Your link code is {_show(code)} "
        f"(single use, valid {minutes} minutes). Signed in to Elowen, run `elowen chat --link {_show(code)}` "
        f'(or POST /brain/channels/link with {{"code": "{_show(code)}"}}), then write here again.'
    )


def approval_prompt(record: dict[str, Any]) -> str:
    """A pending approval or question as text, with how to answer it."""
    pid = record["id"]
    if record["kind"] == "question":
        return f"Question #{pid}: {record['question']}\nAnswer with /answer {pid} <your answer> (or /reject {pid} to dismiss it)."
    args = json.dumps(record.get("arguments") or {}, ensure_ascii=False, default=str)
    if len(args) > 600:
        args = args[:600] + "…"
    warn = ""
    if record.get("destructive"):
        warn = "\nDestructive: " + "; ".join(record.get("reasons") or ["yes"])
    return f"Approval #{pid} needed: {record['tool']} {args}{warn}\nReply /allow {pid} or /reject {pid}."


_EXC_PREFIX = re.compile(r"^(?:[A-Za-z_]\w*\.)*(?:[A-Z][a-z0-9]+){2,}\w*:\s*|^(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception):\s*")


def plain_error(message: str) -> str:
    """A turn's error text as a sentence for a chat: Python exception class names stripped
    (``"ValueError: context too long"`` → ``"Sorry, that did not work: context too long."``)."""
    text = str(message).strip()
    if text.startswith("Sorry, that did not work:"):  # already a sentence (a failed command)
        return text
    while True:
        stripped = _EXC_PREFIX.sub("", text, count=1)
        if stripped == text:
            break
        text = stripped.strip()
    text = text.rstrip(".") or "an unexpected error"
    return f"Sorry, that did not work: {text}."


def _goal_news(data: dict[str, Any]) -> str | None:
    goal, event = data.get("goal") or {}, data.get("event")
    if event == "done":
        return f"Goal done: {goal.get('evidence') or goal.get('text', '')}"
    if event == "paused":
        reason = goal.get("pause_reason") or ""
        extra = f" — {goal['blocked_reason']}" if reason == "blocked" and goal.get("blocked_reason") else ""
        return f"Goal paused ({reason}{extra}). /goal resume to go on."
    return None


async def _collect(events: AsyncIterator[dict[str, Any]], *, skip_approval: int | None = None, on_delta: Callable[[str], None] | None = None) -> list[str]:
    """Reply texts from a session's events until ``brain.done`` or a new approval/question;
    ``on_delta(text)`` sees each streamed text delta as it arrives."""
    out: list[str] = []
    async for item in events:
        kind = item["type"]
        if kind == "brain.delta" and on_delta is not None and item.get("text"):
            on_delta(str(item["text"]))
        elif kind == "brain.message" and item.get("role") == "assistant" and item.get("content"):
            out.append(str(item["content"]))
        elif kind == "brain.command" and item.get("text"):
            out.append(str(item["text"]))
        elif kind == "brain.error":
            out.append(plain_error(str(item.get("message", ""))))
        elif kind == "brain.aborted":
            out.append("Turn aborted.")
        elif kind == "brain.goal":
            news = _goal_news(item)
            if news:
                out.append(news)
        elif kind == "brain.approval" and item["approval"]["id"] != skip_approval:
            out.append(approval_prompt(item["approval"]))
            break
        elif kind == "brain.done":
            break
    return out


# --------------------------------------------------------------------------- turns


def _scope(projects: Any) -> frozenset[int] | None:
    """A channel turn's ``projects`` argument as a set of project ids (``None`` stays ``None``).

    Raises:
        ValueError: not ``None`` nor an iterable of ``int``.
    """
    if projects is None:
        return None
    ids = list(projects) if isinstance(projects, Iterable) and not isinstance(projects, (str, bytes)) else None
    if ids is None or not all(isinstance(p, int) and not isinstance(p, bool) for p in ids):
        raise ValueError("projects: an iterable of project ids (int) or None")
    return frozenset(ids)


def _check(platform_user: Any, text: Any) -> tuple[str, str]:
    if not isinstance(platform_user, str) or not platform_user.strip() or len(platform_user) > MAX_PLATFORM_USER:
        raise ValueError(f"platform_user: a non-empty string of at most {MAX_PLATFORM_USER} characters")
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
        raise ValueError(f"text: a non-empty string of at most {MAX_TEXT} characters")
    return platform_user.strip(), text.strip()


async def _decide(service: BrainService, user_id: int, command: str, args: str, on_delta: Callable[[str], None] | None = None) -> list[str]:
    head, _, rest = args.strip().partition(" ")
    if not (head.isascii() and head.isdigit()) or (command == "/answer" and not rest.strip()):
        usage = "/answer N <your answer>" if command == "/answer" else f"{command} N"
        return [f"Usage: {usage}"]
    pid = int(head)
    record = service.db.pending(pid)
    if record is None or record["user_id"] != user_id:
        return [f"No approval #{pid}."]
    session = service.sessions.existing(int(record["conversation_id"]))
    if session is None or record["state"] != "pending":
        return [f"Approval #{pid} is {record['state'] if record['state'] != 'pending' else 'no longer waited for'}."]
    receive = session.listen(driver=False)  # listen before deciding: nothing said next is missed
    try:
        try:
            decided = service.decide(
                user_id, pid, allow=None if command == "/answer" else command == "/allow", answer=rest.strip() if command == "/answer" else None
            )
        except (LookupError, ValueError) as exc:
            return [f"Not decided: {exc}."]
        ack = {"allowed": "Allowed", "rejected": "Rejected", "answered": "Answered"}.get(decided["state"], decided["state"])
        return [f"{ack} #{pid}.", *await _collect(receive, skip_approval=pid, on_delta=on_delta)]
    finally:
        session.unlisten(receive, driver=False)


def _busy_text(service: BrainService, user_id: int) -> str:
    waiting = service.pending(user_id)
    if not waiting:
        return "Still working on your previous message; send /abort to stop it."
    return "Still waiting for you:\n" + "\n".join(approval_prompt(r) for r in waiting[:3])


async def run_channel_turn(
    service: BrainService,
    platform: str,
    platform_user: str,
    text: str,
    *,
    on_delta: Callable[[str], None] | None = None,
    projects: Iterable[int] | None = None,
) -> list[str]:
    """One message from a platform sender → the reply texts (see the module docstring);
    ``on_delta(text)`` (sync, must not block) sees the assistant's text deltas as they stream;
    ``projects`` (project ids; ``None``: no narrowing) narrows the turn it starts.

    Raises:
        ValueError: a bad ``platform_user``, ``text`` or ``projects``.
    """
    from .commands import CHANNEL_HELP
    from .service import Busy

    platform_user, text = _check(platform_user, text)
    scope = _scope(projects)
    user_id = service.channels.user_for(platform, platform_user)
    if user_id is None:
        return [link_prompt(service.channels.issue_code(platform, platform_user))]
    command, _, args = text.partition(" ")
    if command in _CHANNEL_COMMANDS:
        if command == "/unlink":
            service.unlink_channel(user_id, platform, platform_user, actor="channel")
            return ["Unlinked. Messages from this chat no longer reach your Elowen conversations."]
        if command == "/abort":
            return ["Aborted." if service.abort(user_id, None) else "Nothing is running."]
        return await _decide(service, user_id, command, args, on_delta)
    events = service.stream(user_id, None, text, driver=False, projects=scope)
    try:
        replies = await _collect(events, on_delta=on_delta)
        if command == "/help":
            replies.append(CHANNEL_HELP)
        return replies
    except Busy:
        return [_busy_text(service, user_id)]
    finally:
        await events.aclose()  # type: ignore[attr-defined]


class ChannelGateway:
    """What a platform adapter gets from the brain: ``await gateway.turn(platform_user, text)
    -> list[str]`` (see the module docstring). ``platform`` is the platform's name."""

    def __init__(self, service: BrainService, platform: str) -> None:
        self.platform = platform
        self._service = service
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether the platform was stopped (``turn`` then raises :class:`ChannelClosed`)."""
        return self._closed

    def close(self) -> None:
        self._closed = True

    def linked(self, platform_user: str) -> int | None:
        """The Elowen user id the sender ``platform_user`` is linked to, or ``None`` (a
        stranger: adapters that keep strangers silent ask this before :meth:`turn`)."""
        return self._service.channels.user_for(self.platform, platform_user.strip())

    def senders(self, user_id: int) -> list[str]:
        """The senders (``platform_user`` ids) of this platform linked to Elowen user
        ``user_id``, oldest link first: where a notification for that user goes."""
        return [link["platform_user"] for link in self._service.channels.links(user_id) if link["platform"] == self.platform]

    def check_model(self, spec: str) -> str:
        """``spec`` stripped if a turn could be asked to use it (``"<provider>/<model>"`` of a
        configured provider, as the web chat's model setting accepts; ``""``: the default).

        Raises:
            ValueError: a malformed spec or an unknown provider (the message says which).
        """
        return self._service.check_model(spec)

    async def turn(
        self,
        platform_user: str,
        text: str,
        *,
        on_delta: Callable[[str], None] | None = None,
        projects: Iterable[int] | None = None,
        model: str | None = None,
    ) -> list[str]:
        """Run one message of ``platform_user``; returns the reply texts. ``on_delta(text)``
        (sync, must not block) sees the assistant's text deltas as they stream, for adapters
        that show a reply while it is written.

        ``projects``: the sender's effective project scope on this platform (project ids, e.g.
        a ``frozenset[int]`` from a role map). The turn started by this message — its tools,
        path guard, project list and sub-agents — sees only the linked account's projects that
        are in it (an empty set: none). ``None`` (the default): every project of the account.

        ``model``: a model spec chosen on the platform (a per-channel picker): the conversation
        the message goes to (the linked account's active one) is set to it first, as the web
        chat's model setting would (``""``: back to the default). ``None``: unchanged.

        Raises:
            ChannelClosed: the platform was stopped. ValueError: bad arguments.
        """
        if self._closed:
            raise ChannelClosed(f"platform {self.platform!r} is not running")
        if model is not None:
            user_id = self.linked(platform_user)
            conv = self._service.active(user_id) if user_id is not None else None
            if conv is not None and (conv.get("model") or "") != model.strip():
                self._service.set_model(user_id, int(conv["id"]), model)  # type: ignore[arg-type]
        if on_delta is None:
            return await self._service.channel_turn(self.platform, platform_user, text, projects=_scope(projects))
        return await run_channel_turn(self._service, self.platform, platform_user, text, on_delta=on_delta, projects=projects)


# --------------------------------------------------------------------------- adapters


@dataclass(slots=True)
class _Running:
    plugin: str
    platform: Any
    gateway: ChannelGateway
    scope: trio.CancelScope
    state: str = "starting"
    error: str | None = None
    adapter: Any = None


class PlatformHost:
    """Starts and stops platform adapters so they follow the ``platform`` contributions.

    :meth:`reconcile` is called when the brain loads, on every ``plugin.*`` event, and by the
    ``brain.channels`` loop when the registry generation changed.
    """

    def __init__(self, service: BrainService) -> None:
        self.service = service
        self._running: dict[str, _Running] = {}
        self._generation = -1

    def reconcile(self, *, force: bool = True) -> None:
        """Stop adapters whose ``Platform`` is gone (or was replaced), start the new ones.
        ``force=False`` does nothing while the registry generation is unchanged."""
        ctx = self.service.ctx
        generation = ctx.generation
        if not force and generation == self._generation:
            return
        self._generation = generation
        snapshot = ctx.contributions("platform")
        for name, running in list(self._running.items()):
            owned = snapshot.get(name)
            if owned is None or owned.obj is not running.platform:
                self._stop(name)
        for name, owned in snapshot.items():
            if name not in self._running:
                self._start(name, owned)

    def _start(self, name: str, owned: Any) -> None:
        running = _Running(owned.plugin, owned.obj, ChannelGateway(self.service, name), trio.CancelScope())
        self._running[name] = running
        self.service.ctx.start_soon(self._run, name, running, name=f"brain.platform.{name}")
        log.info("starting platform %s of plugin %s", name, owned.plugin)

    def _stop(self, name: str) -> None:
        running = self._running.pop(name, None)
        if running is not None:
            running.gateway.close()
            running.scope.cancel()
            log.info("stopped platform %s of plugin %s", name, running.plugin)

    async def _run(self, name: str, running: _Running) -> None:
        adapter: Any = None
        try:
            with running.scope:
                adapter = running.platform.factory(running.gateway)
                if inspect.isawaitable(adapter):
                    adapter = await adapter
                running.adapter, running.state = adapter, "running"
                run = getattr(adapter, "run", None)
                if run is not None:
                    await run()
                    running.state = "finished"
                else:
                    await trio.sleep_forever()
        except Exception as exc:
            running.state, running.error = "error", f"{type(exc).__name__}: {exc}"
            log.exception("platform %s (plugin %s) failed", name, running.plugin)
            try:  # fail-open: the other platforms and the brain go on; the failure is on record
                self.service.ctx.store.audit(f"plugin:{running.plugin}", "platform.error", name, "error", {"error": running.error[:500]})
            except Exception:
                log.exception("auditing the failure of platform %s failed", name)
        finally:
            running.gateway.close()
            if adapter is not None:
                await _close(adapter, name)
            if running.state in ("starting", "running"):
                running.state = "stopped"

    def stop_all(self) -> None:
        """Stop every adapter (the brain is going away)."""
        for name in list(self._running):
            self._stop(name)

    def status(self) -> list[dict[str, Any]]:
        """``[{name, plugin, state, error, detail}]`` of the adapters started. ``state``:
        ``starting``, ``running``, ``not_configured`` (running, but the adapter's ``configured``
        is ``False``), the adapter's own ``state`` text while it runs (e.g. ``connected``,
        ``reconnecting``, ``error``), ``finished`` or ``error``; ``detail`` is the adapter's ``detail`` text
        (why it is not configured, say) or ``None``."""
        return [_status(n, r) for n, r in sorted(self._running.items())]


def _status(name: str, running: _Running) -> dict[str, Any]:
    state, detail = running.state, None
    if running.adapter is not None:
        try:
            configured = bool(getattr(running.adapter, "configured", True))
            raw = getattr(running.adapter, "detail", None)
            own = getattr(running.adapter, "state", None)
        except Exception:  # a faulty property must not break the status view
            log.exception("platform %s: reading its status failed", name)
            configured, raw, own = True, None, None
        detail = str(raw) if raw else None
        if state == "running" and not configured:
            state = "not_configured"
        elif state == "running" and isinstance(own, str) and own:
            state = own  # the adapter's own view: connected, reconnecting, error, …
    return {"name": name, "plugin": running.plugin, "state": state, "error": running.error, "detail": detail}


async def _close(adapter: Any, name: str) -> None:
    closer = getattr(adapter, "aclose", None) or getattr(adapter, "close", None)
    if closer is None:
        return
    with trio.CancelScope(shield=True), trio.move_on_after(5):
        try:
            result = closer()
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("closing platform %s failed", name)
