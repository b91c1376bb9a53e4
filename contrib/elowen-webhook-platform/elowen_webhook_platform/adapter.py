"""The webhook adapter: inbound messages are queued by the HTTP route, handled one sender at a
time (in order) through the brain's gateway, and every reply is POSTed to the callback URL.

Callback wire format (one POST per reply, ``Content-Type: application/json``)::

    {"platform": "webhook", "user": "<sender id>", "text": "<reply>", "reply_to": "<inbound id>"}

with the header ``X-Elowen-Signature: sha256=<hex HMAC-SHA256 of the raw body, keyed with the
shared secret>`` so the receiver can check the POST came from this Elowen. A failed POST (an
error or a non-2xx answer) is logged (naming only the callback's host) and retried once after
one second.

**Queue.** At most ``queue_size`` messages are accepted and not yet finished, across all
senders; :meth:`WebhookAdapter.submit` refuses more with :class:`QueueFull`. Each sender's
messages are handled in the order they came, one at a time; different senders run
concurrently.

**Stopping.** When the plugin is disabled or reconfigured the brain cancels :meth:`run` and
calls :meth:`WebhookAdapter.aclose`: the unfinished messages (waiting or in progress) are
dropped, one WARNING line says how many, and each affected sender gets one reply,
:data:`RESTART_TEXT`, best effort within :data:`NOTICE_TIMEOUT` seconds (one attempt, no retry).

To write a Discord or Matrix adapter, keep the shape: ``run()`` connects to the platform and
loops over its incoming messages, one task per sender with ``await gateway.turn(sender,
text)``; the replies go back through the platform's send call.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import trio

from elowen_sdk import ElowenError

from .checks import config_problem, host_of

__all__ = ["NOTICE_TIMEOUT", "RESTART_TEXT", "RETRY_AFTER", "Inbound", "QueueFull", "WebhookAdapter", "sign"]

log = logging.getLogger("elowen.plugin.webhook")

RESTART_TEXT = "Elowen restarted this chat; please send your message again."
"""The reply a sender gets for messages dropped because the platform stopped."""
NOTICE_TIMEOUT = 3.0
"""Seconds :meth:`WebhookAdapter.aclose` spends on the restart replies (the brain allows 5)."""
RETRY_AFTER = 5
"""Seconds a refused (queue full) sender is told to wait before trying again."""


@dataclass(frozen=True, slots=True)
class Inbound:
    """One inbound message: the sender's id, the text, and the id the callback echoes."""

    user: str
    text: str
    id: str


class QueueFull(ElowenError):
    """``queue_size`` messages are accepted and not finished yet; ``retry_after`` is a hint in
    seconds."""

    def __init__(self, limit: int, retry_after: int = RETRY_AFTER) -> None:
        super().__init__(f"{limit} messages are waiting, the most this platform accepts; retry after {retry_after} seconds")
        self.limit = limit
        self.retry_after = retry_after


def sign(secret: str, body: bytes) -> str:
    """The ``X-Elowen-Signature`` value of ``body``: ``sha256=<hex HMAC-SHA256>``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


class _QuietCallback(logging.Filter):
    """Drops httpx's per-request INFO line (``HTTP Request: POST <full URL> …``) for requests to
    one callback URL: its path or query may carry a token. Other httpx records pass."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.key = _url_key(url)

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if record.levelno > logging.INFO or not isinstance(args, tuple) or len(args) < 2:
            return True
        return not (isinstance(args[1], httpx.URL) and _url_key(args[1]) == self.key)


def _url_key(url: str | httpx.URL) -> tuple[str, str, int | None, str] | None:
    try:
        u = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return None
    return (u.scheme, u.host, u.port, u.path)


class WebhookAdapter:
    """The adapter the brain runs for the ``webhook`` platform.

    Args:
        gateway: the brain's gateway (``await gateway.turn(user, text) -> list[str]``).
        config: the plugin's config (``secret``, ``callback_url``, ``timeout`` seconds,
            ``queue_size`` messages), read once here.
        log: where to log (the plugin's logger).

    ``configured`` / ``detail`` tell the brain's status view whether the config is usable
    (see :func:`.checks.config_problem`); while it is not, :meth:`run` only waits.
    """

    def __init__(self, gateway: Any, config: Mapping[str, Any], log: logging.Logger = log) -> None:
        self.gateway = gateway
        self.platform = str(getattr(gateway, "platform", "webhook"))
        self.secret = str(config.get("secret") or "")
        self.callback_url = str(config.get("callback_url") or "").strip()
        self.timeout = float(config.get("timeout", 10))
        self.queue_size = int(config.get("queue_size", 100))
        self.problem = config_problem(config)
        self.log = log
        self.delivered = 0
        self.pending = 0
        """Messages accepted and not finished (waiting or in progress), all senders."""
        self._queues: dict[str, deque[Inbound]] = {}
        self._busy: set[str] = set()
        self._nursery: trio.Nursery | None = None
        self._client: httpx.AsyncClient | None = None
        self._closed = False

    @property
    def configured(self) -> bool:
        """Whether the config is usable (a long enough secret and an http(s) callback URL)."""
        return self.problem is None

    @property
    def detail(self) -> str | None:
        """Why the platform is not configured, or ``None``."""
        return self.problem

    @property
    def host(self) -> str:
        """The callback URL's host — all the logs say of it."""
        return host_of(self.callback_url)

    def submit(self, message: Inbound) -> None:
        """Accept an inbound message (called by the route; never waits).

        Raises:
            QueueFull: ``queue_size`` messages are accepted and not finished.
            trio.ClosedResourceError: the adapter stopped.
        """
        if self._closed:
            raise trio.ClosedResourceError("the webhook platform stopped")
        if self.pending >= self.queue_size:
            raise QueueFull(self.queue_size)
        queue = self._queues.get(message.user)
        self.pending += 1
        if queue is not None:
            queue.append(message)
            return
        self._queues[message.user] = deque([message])
        if self._nursery is not None:
            self._nursery.start_soon(self._sender, message.user)

    async def run(self) -> None:
        """Handle accepted messages until cancelled (the plugin or the brain is disabled)."""
        if self.problem is not None:
            self.log.warning("webhook platform not configured: %s", self.problem)
            await trio.sleep_forever()
        self.log.info("webhook platform running; replies go to %s", self.host)
        with _quiet_httpx(self.callback_url):
            async with httpx.AsyncClient(timeout=self.timeout) as client, trio.open_nursery() as nursery:
                self._client, self._nursery = client, nursery
                try:
                    for user in list(self._queues):  # accepted before run started
                        nursery.start_soon(self._sender, user)
                    await trio.sleep_forever()
                finally:
                    self._nursery = self._client = None

    async def aclose(self) -> None:
        """Refuse further messages; drop the unfinished ones, log how many (one WARNING line)
        and tell each affected sender :data:`RESTART_TEXT` (best effort, at most
        :data:`NOTICE_TIMEOUT` seconds)."""
        self._closed = True
        dropped = {user: list(queue) for user, queue in self._queues.items() if queue}
        in_progress = len(self._busy & dropped.keys())
        self._queues.clear()
        self._busy.clear()
        self.pending = 0
        if not dropped:
            return
        count = sum(len(msgs) for msgs in dropped.values())
        self.log.warning(
            "webhook platform stopped: dropped %d unfinished message(s) (%d in progress) of %d sender(s); asking them to send again",
            count,
            in_progress,
            len(dropped),
        )
        if self.problem is not None:
            return
        with trio.move_on_after(NOTICE_TIMEOUT), _quiet_httpx(self.callback_url):
            async with httpx.AsyncClient(timeout=NOTICE_TIMEOUT) as client, trio.open_nursery() as nursery:
                for msgs in dropped.values():
                    nursery.start_soon(self._post, client, msgs[0], RESTART_TEXT)

    async def _sender(self, user: str) -> None:
        """Handle ``user``'s messages in order until their queue is empty. A message leaves
        the queue only once finished, so a cancelled one is still there for :meth:`aclose`."""
        queue = self._queues.get(user)
        while queue:
            self._busy.add(user)  # left set when cancelled: aclose counts it as in progress
            finished = await self._handle(queue[0])
            self._busy.discard(user)
            if not finished:
                return
            queue.popleft()
            self.pending -= 1
        if self._queues.get(user) is queue:
            del self._queues[user]

    async def _handle(self, message: Inbound) -> bool:
        """One turn and its replies; ``False`` when the gateway closed (the platform stops)."""
        try:
            replies = await self.gateway.turn(message.user, message.text)
        except ValueError as exc:
            replies = [f"Sorry, that message was not accepted: {str(exc).rstrip('.')}."]
        except RuntimeError as exc:  # the gateway closed: the platform is stopping
            self.log.info("the gateway closed before a message was handled: %s", exc)
            return False
        except Exception:  # a bug in a turn must not stop the other senders' messages
            self.log.exception("a turn of the webhook platform failed")
            replies = ["Sorry, that did not work: something went wrong in Elowen."]
        client = self._client
        for text in replies:
            if client is not None:
                await self._deliver(client, message, text)
        return True

    def _body(self, message: Inbound, text: str) -> tuple[bytes, dict[str, str]]:
        body = json.dumps({"platform": self.platform, "user": message.user, "text": text, "reply_to": message.id}, ensure_ascii=False).encode("utf-8")
        return body, {"Content-Type": "application/json", "X-Elowen-Signature": sign(self.secret, body)}

    async def _post(self, client: httpx.AsyncClient, message: Inbound, text: str) -> str | None:
        """One POST of a reply; ``None`` on success, else what went wrong."""
        body, headers = self._body(message, text)
        try:
            resp = await client.post(self.callback_url, content=body, headers=headers)
        except httpx.HTTPError as exc:  # the message may repeat the URL: log only the class
            return type(exc).__name__
        if resp.is_success:
            self.delivered += 1
            return None
        return f"HTTP {resp.status_code}"

    async def _deliver(self, client: httpx.AsyncClient, message: Inbound, text: str) -> None:
        for attempt in (1, 2):
            problem = await self._post(client, message, text)
            if problem is None:
                return
            self.log.warning("callback to %s failed (attempt %d): %s", self.host, attempt, problem)
            if attempt == 1:
                await trio.sleep(1.0)


@contextmanager
def _quiet_httpx(url: str) -> Iterator[None]:
    """Keep httpx's per-request INFO line for ``url`` out of the logs while inside."""
    quiet = _QuietCallback(url)
    logger = logging.getLogger("httpx")
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)
