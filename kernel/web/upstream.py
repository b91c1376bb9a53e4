"""Calls from the web front end to the daemon (one ``httpx.AsyncClient`` per process).

Every call carries the logged-in user's daemon token. Results are :class:`Reply` objects
(status and decoded JSON body) so views can degrade per panel: a 404 from a plugin route
means "that plugin is disabled or missing", a connection error means "the daemon is down".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from elowen_sdk import ElowenError

__all__ = ["DaemonDown", "Reply", "Upstream"]

log = logging.getLogger(__name__)

#: Seconds per ordinary daemon call (connect, read, write).
CALL_TIMEOUT = 10.0


class DaemonDown(ElowenError):
    """The daemon did not answer (refused, reset, timed out)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A daemon answer: ``status`` and ``body`` (decoded JSON, or ``None``)."""

    status: int
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def missing(self) -> bool:
        """404: for a plugin route, the plugin is disabled or not installed."""
        return self.status == 404

    def error_message(self) -> str:
        """The daemon's ``error.message`` (or a generic text)."""
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            return str(self.body["error"].get("message") or self.body["error"].get("code"))
        return f"the daemon answered {self.status}"

    def items(self) -> list[dict[str, Any]]:
        """``body["items"]`` of a list answer (empty when not ok)."""
        if self.ok and isinstance(self.body, dict) and isinstance(self.body.get("items"), list):
            return self.body["items"]
        return []


class Upstream:
    """The daemon as seen from the web process.

    Args:
        base_url: the daemon's base URL (``http://127.0.0.1:4400``).
    """

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.client = httpx.AsyncClient(base_url=base_url, timeout=CALL_TIMEOUT, limits=httpx.Limits(max_connections=200))

    async def call(
        self,
        token: str | None,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Reply:
        """One REST call (``timeout``: seconds instead of :data:`CALL_TIMEOUT`, for a call the
        daemon answers slowly by design, e.g. adding an MCP server, which starts it).

        Raises:
            DaemonDown: no answer from the daemon.
        """
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        clean = {k: v for k, v in (params or {}).items() if v is not None and v != ""}
        try:
            extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
            resp = await self.client.request(method, path, json=json, params=clean, headers=headers, **extra)
        except httpx.HTTPError as exc:
            log.info("daemon call %s %s failed: %s", method, path, exc)
            raise DaemonDown(str(exc) or type(exc).__name__) from None
        try:
            body = resp.json() if resp.content else None
        except ValueError:
            body = None
        return Reply(resp.status_code, body)

    async def aclose(self) -> None:
        await self.client.aclose()
