"""The Discord adapter the brain runs (``Platform("discord", factory)``): trio side.

``run()`` supervises one discord.py client on its own asyncio thread (:mod:`.bridge`), turns
each inbound message into a brain turn through the gateway, and streams the reply back
(:mod:`.stream`).

State (``state``, shown by ``GET /brain/channels`` and the Platforms view): ``not_configured``
(no token file, or discord.py is not installed: ``detail`` says which), ``connecting``,
``connected`` (READY or RESUMED seen), ``reconnecting`` (discord.py lost the gateway and is
resuming, or the watchdog restarted it), ``error`` (the client stopped: a refused token, say;
retried with back-off, ``detail`` says why).

Inbound-silence watchdog: Discord sends a HEARTBEAT_ACK for every heartbeat (every ~41 s), so
a healthy connection is never silent for long. When no gateway frame at all arrived for
``silence_timeout`` seconds, the connection is taken as deaf (a "zombie": shown connected,
hearing nothing). First remedy: close the socket with code 4000 so discord.py RESUMEs (missed
events are replayed). If the connection is still silent ``restart_grace`` seconds later (or
the asyncio thread does not answer: a wedged library), the client and its thread are
discarded and a new one IDENTIFYs. Each restart is audited (``discord.watchdog``).

Senders: a stranger (no linked Elowen account) gets no answer and is counted
(:class:`elowen_sdk.platforms.StrangerGate`), except a DM ``link`` when ``pairing`` is on.

One sender's messages are handled one at a time, in the order they arrived
(:class:`elowen_sdk.platforms.SenderQueues`); different senders' at the same time, up to
``max_concurrent_turns``.

``/model`` (the slash command choosing a channel's model) is held to the same rules as a
message: the role/channel scope (:class:`.scope.RoleScope`) refuses it ephemerally, and one
sender's interactions are answered one at a time in arrival order (a queue of their own, so
``/model`` never waits for a running turn: Discord takes an answer only within 3 s).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from elowen_sdk import ElowenError
from elowen_sdk.platforms import RecentIds, SecretError, SenderQueues, StrangerGate, approval_command, chunk_text, read_secret

from .bot import DiscordBot, Inbound, InteractionIn
from .bridge import AsyncioThread, BridgeClosed
from .scope import RoleScope, ScopeDecision
from .stream import MAX_CONTENT, StreamedReply

__all__ = ["DiscordAdapter"]

ATTACHMENT_ONLY = "I can only read text here: files and images are not passed to the assistant. Please write your request as text."
NOT_LINKED = "This Discord account is not linked to Elowen, so there is nothing to choose here."
INTERACTION_TIMEOUT = 10.0
"""Seconds answering one interaction may take (after the sender's earlier ones)."""
TOO_LONG = "That message is too long for me ({n} characters; at most {limit}). Please shorten it."


class DiscordAdapter:
    """One Discord bot (see the module docstring).

    Args:
        gateway: the brain's channel gateway (``platform``, ``linked()``, ``turn()``).
        ctx: the plugin's context (config, log, data_dir, store, service lookup).
    """

    def __init__(self, gateway: Any, ctx: Any) -> None:
        self.gateway = gateway
        self.ctx = ctx
        self.log: logging.Logger = ctx.log
        cfg: Mapping[str, Any] = ctx.config
        self.config = cfg
        token_file = str(cfg.get("token_file") or "")
        self.token_path = Path(token_file).expanduser() if token_file else Path(ctx.data_dir) / "token"
        self.silence_timeout = float(cfg.get("silence_timeout", 90.0))
        self.restart_grace = float(cfg.get("restart_grace", 15.0))
        self.edit_interval = float(cfg.get("edit_interval", 1.0))
        self.turn_timeout = float(cfg.get("turn_timeout", 900.0))
        self.max_text = int(cfg.get("max_text", 4000))
        self.gate = StrangerGate(pairing=bool(cfg.get("pairing", False)), max_pending=int(cfg.get("max_pending_codes", 20)))
        self.recent = RecentIds()
        self.state = "connecting"
        self.configured = True
        self.detail: str | None = None
        self.restarts = 0
        self.transitions: deque[tuple[float, str]] = deque(maxlen=50)
        """The last state changes as ``(time.monotonic(), state)``."""
        self.turns = 0
        self.dropped = 0
        self.first_token_times: list[float] = []
        """Seconds from a message's arrival on the asyncio thread to its first visible reply."""
        self.role_prompts: dict[str, tuple[str, ...]] = {}
        """Elowen user id → the role prompts of their Discord turn running now."""
        self._limiter = trio.CapacityLimiter(int(cfg.get("max_concurrent_turns", 50)))
        self._senders: SenderQueues[Inbound] = SenderQueues(self._handle_safely)
        """Per-sender message queues, by Discord user id."""
        self._interacting: SenderQueues[tuple[InteractionIn, AsyncioThread, DiscordBot]] = SenderQueues(self._interaction_safely, limit=5)
        """Per-sender slash-command queues, by Discord user id."""
        self._thread: AsyncioThread | None = None
        self._bot: DiscordBot | None = None
        self._state_changed = trio.Event()
        self._nursery: trio.Nursery | None = None
        self.models_path = Path(ctx.data_dir) / "channel_models.json"
        self.channel_models: dict[str, str] = self._load_models()
        """``"<channel id>:<Discord user id>"`` → the model spec chosen with ``/model`` there."""
        try:
            self.scope = RoleScope(cfg.get("roles") or {}, cfg.get("channel_projects") or {})
        except ValueError as exc:
            self.scope = RoleScope({}, {})
            self._not_configured(f"bad role map: {exc}")

    # -- state -------------------------------------------------------------------------------

    def _not_configured(self, why: str) -> None:
        self.configured, self.detail, self.state = False, why, "not_configured"

    def _set_state(self, state: str, detail: str | None = None) -> None:
        if state != self.state:
            self.log.info("state %s%s", state, f" ({detail})" if detail else "")
            self.transitions.append((time.monotonic(), state))
        self.state, self.detail = state, detail
        self._state_changed.set()
        self._state_changed = trio.Event()

    def status(self) -> dict[str, Any]:
        """Counters for the status views: ``{state, detail, restarts, turns, silenced,
        codes_refused, duplicates, dropped}``."""
        return {
            "state": self.state,
            "detail": self.detail,
            "restarts": self.restarts,
            "turns": self.turns,
            "silenced": self.gate.silenced,
            "codes_refused": self.gate.codes_refused,
            "duplicates": self.recent.duplicates,
            "dropped": self.dropped,
        }

    # -- run ---------------------------------------------------------------------------------

    async def run(self) -> None:
        if not self.configured:
            await trio.sleep_forever()
        try:
            token = read_secret(self.token_path)
        except SecretError as exc:
            self._not_configured(str(exc))
            await trio.sleep_forever()
        try:
            import discord  # noqa: F401
        except ImportError:
            self._not_configured("discord.py is not installed: pip install 'elowen[discord]'")
            await trio.sleep_forever()
        send, receive = trio.open_memory_channel[Inbound](int(self.config.get("queue_size", 200)))
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._supervise, token, send)
            nursery.start_soon(self._consume, receive, nursery)

    async def _supervise(self, token: str, send: trio.MemorySendChannel[Inbound]) -> None:
        backoff = 1.0
        while True:
            outcome = await self._session(token, send)
            if outcome == "watchdog":
                backoff = 1.0
                continue
            self._set_state("error", outcome)
            self._audit("discord.client", "error", {"reason": outcome})
            await trio.sleep(backoff)
            backoff = min(backoff * 2, 300.0)

    async def _session(self, token: str, send: trio.MemorySendChannel[Inbound]) -> str:
        """Run one client until it stops (returns why) or the watchdog discards it
        (``"watchdog"``)."""
        thread = AsyncioThread("elowen-discord")
        thread.start()

        def deliver(item: Inbound) -> None:
            try:
                send.send_nowait(item)
            except trio.WouldBlock:
                self.dropped += 1
                self.log.warning("inbound queue full, dropped a message (%d so far)", self.dropped)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                pass

        bot = DiscordBot(
            token=token,
            api_base=str(self.config.get("api_base") or "https://discord.com/api/v10"),
            gateway_url=str(self.config.get("gateway_url") or "wss://gateway.discord.gg/"),
            on_inbound=lambda item: thread.to_trio(deliver, item),
            on_state=lambda state: thread.to_trio(self._set_state, state),
            on_interaction=lambda item: thread.to_trio(self._interaction_arrived, item, thread, bot),
        )
        self._thread, self._bot = thread, bot
        self._set_state("reconnecting" if self.restarts else "connecting")
        future = thread.submit(bot.run())
        finished = trio.Event()
        token_ = trio.lowlevel.current_trio_token()

        def wake(_: Any) -> None:
            try:
                token_.run_sync_soon(finished.set)
            except trio.RunFinishedError:
                pass

        future.add_done_callback(wake)
        try:
            async with trio.open_nursery() as nursery:
                watchdog_fired = False

                async def watch() -> None:
                    nonlocal watchdog_fired
                    watchdog_fired = await self._watch(thread, bot)
                    nursery.cancel_scope.cancel()

                nursery.start_soon(watch)
                await finished.wait()
                nursery.cancel_scope.cancel()
            if watchdog_fired:
                return "watchdog"
            exc = future.exception() if not future.cancelled() else None
            return f"{type(exc).__name__}: {_plain(exc)}" if exc else "the Discord client stopped"
        finally:
            await self._discard(thread, bot)

    async def _watch(self, thread: AsyncioThread, bot: DiscordBot) -> bool:
        """Return ``True`` once the connection was found deaf and the remedies failed; the
        caller then discards the client."""
        resumed_at: float | None = None
        while True:
            await trio.sleep(min(1.0, self.silence_timeout / 4))
            silent = time.monotonic() - bot.last_frame
            if self.state not in ("connected", "reconnecting"):
                continue
            if resumed_at is None and silent >= self.silence_timeout:
                self.restarts += 1
                self.log.warning("no gateway frame for %.1f s; closing the socket to RESUME", silent)
                self._audit("discord.watchdog", "resume", {"silent_seconds": round(silent, 1)})
                self._set_state("reconnecting", f"no gateway frame for {silent:.0f} s")
                resumed_at = time.monotonic()
                try:
                    await thread.call(bot.drop_connection(), timeout=self.restart_grace)
                except (trio.TooSlowError, BridgeClosed):
                    self.log.warning("the client did not answer; restarting it")
                    self._audit("discord.watchdog", "restart", {"reason": "client did not answer"})
                    return True
                except Exception as exc:
                    self.log.warning("closing the socket failed (%s)", type(exc).__name__)
            elif resumed_at is not None:
                if bot.last_frame > resumed_at:
                    resumed_at = None  # frames again: the RESUME worked
                elif time.monotonic() - resumed_at >= self.restart_grace:
                    self.log.warning("still deaf %.1f s after RESUME; restarting the client", self.restart_grace)
                    self._audit("discord.watchdog", "restart", {"reason": "still silent after resume"})
                    return True

    async def _discard(self, thread: AsyncioThread, bot: DiscordBot) -> None:
        with trio.CancelScope(shield=True):
            try:
                await thread.call(bot.close(), timeout=5)
            except Exception as exc:  # the client is being dropped anyway: say why it did not close cleanly
                self.log.debug("closing the Discord client failed: %s", exc)
            thread.stop()
            if not await thread.join(5):
                self.log.warning("the client thread did not stop; abandoned")
        if self._thread is thread:
            self._thread, self._bot = None, None

    def _audit(self, action: str, outcome: str, details: dict[str, Any]) -> None:
        try:
            self.ctx.store.audit("plugin:discord", action, self.gateway.platform, outcome, details)
        except Exception:
            self.log.exception("auditing %s failed", action)

    async def aclose(self) -> None:
        thread, bot = self._thread, self._bot
        if thread is not None and bot is not None:
            await self._discard(thread, bot)

    # -- messages ----------------------------------------------------------------------------

    async def _consume(self, receive: trio.MemoryReceiveChannel[Inbound], nursery: trio.Nursery) -> None:
        async for item in receive:
            if self.recent.seen(item.message_id):
                continue
            if not self._senders.put(item.author_id, item, nursery.start_soon):
                self.log.warning("sender %s has %d messages waiting; dropped message %s", item.author_id, self._senders.limit, item.message_id)

    async def _handle_safely(self, item: Inbound) -> None:
        try:
            async with self._limiter:  # one turn at a time per sender: its queue (_senders) awaits each
                with trio.move_on_after(self.turn_timeout) as scope:
                    await self._handle(item)
                if scope.cancelled_caught:
                    self.log.warning("a turn of sender %s ran over %.0f s; stopped waiting", item.author_id, self.turn_timeout)
        except Exception:
            self.log.exception("handling message %s failed", item.message_id)

    async def _handle(self, item: Inbound) -> None:
        user_id = self.gateway.linked(item.author_id)
        if user_id is None:
            await self._stranger(item)
            return
        self.gate.linked(item.author_id)
        decision = self.scope.decide(role_ids=item.role_ids, channel_id=item.channel_id, direct=item.direct, account=self._account(user_id))
        if not decision.allowed:
            await self._say(item.channel_id, decision.reason)
            return
        if not item.text:
            if item.attachments:
                await self._say(item.channel_id, ATTACHMENT_ONLY)
            return
        if len(item.text) > self.max_text:
            await self._say(item.channel_id, TOO_LONG.format(n=len(item.text), limit=self.max_text))
            return
        self.turns += 1

        def first() -> None:
            self.first_token_times.append(time.monotonic() - item.received)

        stream = StreamedReply(self._send, self._edit, item.channel_id, edit_interval=self.edit_interval, on_first=first)
        if decision.prompts:  # read by the plugin's turn_context hook while this turn runs
            self.role_prompts[str(user_id)] = decision.prompts
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stream.pump)
                try:
                    replies = await self.gateway.turn(
                        item.author_id,
                        approval_command(item.text),
                        on_delta=stream.feed,
                        projects=self._narrowing(decision),
                        model=self._model_for(item.channel_id, item.author_id, user_id),
                    )
                except ValueError as exc:
                    replies = [f"Sorry, that did not work: {exc}."]
                await stream.finish(replies)
        finally:
            self.role_prompts.pop(str(user_id), None)

    # -- the /model picker -------------------------------------------------------------------

    def _interaction_arrived(self, item: InteractionIn, thread: AsyncioThread, bot: DiscordBot) -> None:
        try:
            if self._nursery is None:
                raise RuntimeError("the adapter is not running")
            if not self._interacting.put(item.author_id, (item, thread, bot), self._nursery.start_soon):
                self._forget_interaction(thread, bot, item.key)  # a flood of one sender's commands: not answered
        except RuntimeError:  # not running, or the nursery closed: nobody will answer it
            self._forget_interaction(thread, bot, item.key)

    async def _interaction_safely(self, queued: tuple[InteractionIn, AsyncioThread, DiscordBot]) -> None:
        item, thread, bot = queued
        try:
            with trio.fail_after(INTERACTION_TIMEOUT):
                await self._interaction(item, thread, bot)
        except Exception:
            self.log.exception("answering interaction %s failed", item.key)
        finally:
            self._forget_interaction(thread, bot, item.key)  # a no-op once answered

    def _forget_interaction(self, thread: AsyncioThread, bot: DiscordBot, key: str) -> None:
        try:
            thread.submit(bot.forget(key))
        except BridgeClosed:
            pass  # the client is gone, and its pending interactions with it

    @property
    def pending_interactions(self) -> int:
        """Interactions the running client holds unanswered (0 without a client)."""
        bot = self._bot
        return bot.pending_interactions if bot is not None else 0

    async def _interaction(self, item: InteractionIn, thread: AsyncioThread, bot: DiscordBot) -> None:
        """Answer one ``/model`` interaction (or its autocomplete) through ``bot``, the client
        that received it."""

        async def answer(text: str | None = None, choices: list[str] | None = None) -> None:
            await thread.call(bot.respond(item.key, text=text, choices=choices), timeout=5)

        if item.command != "model":
            await answer("Unknown command.")
            return
        user_id = self.gateway.linked(item.author_id)
        if user_id is None:
            if item.autocomplete:
                await answer(choices=[])
            else:
                await answer(NOT_LINKED)
            return
        decision = self.scope.decide(role_ids=item.role_ids, channel_id=item.channel_id, direct=item.guild_id is None, account=self._account(user_id))
        if not decision.allowed:  # the same refusal a message here would get, seen by the sender only
            if item.autocomplete:
                await answer(choices=[])
            else:
                await answer(decision.reason)
            return
        allowed = self.allowed_models(user_id)
        if item.autocomplete:
            typed = item.value.lower()
            await answer(choices=[m for m in allowed if typed in m.lower()])
            return
        key = f"{item.channel_id}:{item.author_id}"
        current = self.channel_models.get(key) or "the default model"
        if not item.value:
            listing = "\n".join(f"- `{m}`" for m in allowed) or "(none: ask an Elowen admin to offer models on Discord)"
            await answer(f"Model here: `{current}`. You may choose:\n{listing}\nUse `/model model:<name>`.")
            return
        if item.value.lower() == "default":
            self.channel_models[key] = ""  # "" puts the conversation back on the default at the next turn
            self._save_models()
            await answer("This channel's conversation is back to the default model.")
            return
        if item.value not in allowed:
            await answer(f"`{item.value[:100]}` is not a model you may use here. Run `/model` to see yours.")
            return
        self.channel_models[key] = item.value
        self._save_models()
        self._audit("discord.model", "ok", {"channel": str(item.channel_id), "user_id": user_id, "model": item.value})
        await answer(f"This channel's conversation now uses `{item.value}` (from your next message).")

    def _model_for(self, channel_id: Any, author_id: Any, user_id: int) -> str | None:
        """The model this channel's turn asks for: the sender's ``/model`` choice while it is
        still one they may use (a demotion, a model taken off the list or a relinked account
        ends it: ``""``, the default), ``None`` when they never chose."""
        spec = self.channel_models.get(f"{channel_id}:{author_id}")
        if not spec:
            return spec
        return spec if spec in self.allowed_models(user_id) else ""

    def allowed_models(self, user_id: int) -> list[str]:
        """The model specs Elowen user ``user_id`` may pick with ``/model``: the ``models``
        setting, plus ``admin_models`` for an Elowen admin, keeping only specs the brain would
        accept (a configured provider: the same check as the web chat's model setting)."""
        specs = [str(m) for m in self.config.get("models") or []]
        if self._is_admin(user_id):
            specs += [str(m) for m in self.config.get("admin_models") or []]
        allowed: list[str] = []
        for spec in specs:
            try:
                checked = self.gateway.check_model(spec)
            except ValueError:
                continue
            if checked and checked not in allowed:
                allowed.append(checked)
        return allowed

    def _is_admin(self, user_id: int) -> bool:
        try:
            from elowen_sdk.services import UsersService

            row = self.ctx.service(UsersService).user(user_id)
        except (ElowenError, LookupError):
            return False
        return bool(row) and row.get("role") == "admin"

    def _load_models(self) -> dict[str, str]:
        import json

        try:
            data = json.loads(self.models_path.read_text())
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def _save_models(self) -> None:
        import json

        try:
            self.models_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.models_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.channel_models, sort_keys=True))
            tmp.replace(self.models_path)
        except OSError as exc:
            self.log.warning("saving the channel models failed: %s", exc)

    async def _stranger(self, item: Inbound) -> None:
        if not self.gate.may_pair(item.author_id, item.text, direct=item.direct):
            if self.gate.silenced in (1, 10, 100) or self.gate.silenced % 1000 == 0:
                self.log.info("%d message(s) from unlinked senders left unanswered", self.gate.silenced)
            return
        replies = await self.gateway.turn(item.author_id, item.text)
        for reply in replies:
            await self._say(item.channel_id, reply)

    def _narrowing(self, decision: ScopeDecision) -> frozenset[int] | None:
        """The project set the brain turn is narrowed to: the effective scope with a role map;
        ``None`` (the account's projects, as on the web) without one or for an admin's DM."""
        return decision.projects if self.scope.enabled else None

    def _account(self, user_id: int) -> Mapping[str, Any] | None:
        if not self.scope.enabled and not self.scope.channels:
            return None
        try:
            from elowen_sdk.services import UsersService

            return self.ctx.service(UsersService).user(user_id)
        except (ElowenError, LookupError):
            return None

    async def _say(self, channel_id: int, text: str) -> None:
        stream = StreamedReply(self._send, self._edit, channel_id, edit_interval=self.edit_interval)
        await stream.finish([text])

    async def notify(self, user_id: int, text: str) -> bool:
        """DM ``text`` to every Discord sender linked to Elowen user ``user_id`` (cut to
        Discord's message size); ``False`` when none is linked.

        Raises:
            BridgeClosed: the client is restarting (the caller retries later).
        """
        senders = self.gateway.senders(user_id)
        for sender in senders:
            thread, bot = self._live()
            for chunk in chunk_text(text, MAX_CONTENT):
                await thread.call(bot.send_dm(int(sender), chunk), timeout=30)
        return bool(senders)

    async def _send(self, channel_id: int, text: str) -> int:
        thread, bot = self._live()
        return int(await thread.call(bot.send(channel_id, text), timeout=30))

    async def _edit(self, channel_id: int, message_id: int, text: str) -> None:
        thread, bot = self._live()
        await thread.call(bot.edit(channel_id, message_id, text), timeout=30)

    async def manage(self, call: Any) -> Any:
        """Run ``call(bot)`` (a coroutine of the :class:`.bot.DiscordBot`: ``list_channels``,
        ``create_thread``, …) on the client's thread and return its result (the brain tools of
        :mod:`.tools`; 30 s at most).

        Raises:
            BridgeClosed: the client is restarting. What the call raises.
        """
        thread, bot = self._live()
        return await thread.call(call(bot), timeout=30)

    def _live(self) -> tuple[AsyncioThread, DiscordBot]:
        thread, bot = self._thread, self._bot
        if thread is None or bot is None:
            raise BridgeClosed("the Discord client is restarting")
        return thread, bot


def _plain(exc: BaseException | None) -> str:
    text = str(exc or "").strip()
    return text[:300] or "no detail"
