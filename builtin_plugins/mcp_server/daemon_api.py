"""The daemon's own REST API, called on behalf of an MCP caller with the caller's token.

An MCP tool call is the REST call it stands for: the same route, the same token, so the same
authentication, RBAC, validation, audit record and error (a member gets the same 403
``not_owner`` from ``task_cancel`` as from ``POST /tasks/{id}/cancel``). The daemon's address
comes from its pid file (``$ELOWEN_HOME/daemon.pid``: ``{"pid", "port", "host", …}``, written
once it listens); a wildcard bind (``0.0.0.0`` / ``::``) is reached on loopback.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from elowen_sdk import ElowenError

__all__ = ["DaemonApi", "RestError", "base_url"]

PID_FILE = "daemon.pid"


class RestError(ElowenError):
    """The REST call answered an error: ``status`` (HTTP), ``code`` and ``message`` (the
    daemon's ``{"error": {"code", "message"}}``), or status 0 when the daemon was not reached
    or did not answer in time."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "code": self.code, "message": self.message}


def base_url(home: Path) -> str:
    """``http://host:port`` of the daemon serving ``home`` (from its pid file).

    Raises:
        RestError: no readable pid file (status 0, code ``daemon_unknown``).
    """
    try:
        info = json.loads((home / PID_FILE).read_text(encoding="utf-8"))
        host, port = str(info["host"]), int(info["port"])
    except (OSError, ValueError, KeyError, TypeError):
        raise RestError(0, "daemon_unknown", f"the daemon's address is not known yet ({home / PID_FILE})") from None
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _error(resp: httpx.Response) -> RestError:
    try:
        err = resp.json()["error"]
        return RestError(resp.status_code, str(err["code"]), str(err["message"]))
    except (ValueError, KeyError, TypeError):
        return RestError(resp.status_code, "http_error", resp.text[:500] or resp.reason_phrase)


class DaemonApi:
    """One pooled HTTP client to the daemon; every call carries the caller's ``Authorization``.

    ``timeout`` (seconds) bounds each call; a call that takes longer raises :class:`RestError`
    (status 0, code ``timeout``).
    """

    def __init__(self, home: Path, timeout: float) -> None:
        self._home = home
        self._base: str | None = None
        self.timeout = timeout
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=10.0), limits=httpx.Limits(max_connections=64))

    def _url(self, path: str) -> str:
        if self._base is None:
            self._base = base_url(self._home)
        return self._base + path

    async def call(
        self,
        authorization: str,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """The JSON answer of ``method path``; raises :class:`RestError` for an error status."""
        limit = self.timeout if timeout is None else timeout
        params = {k: v for k, v in (query or {}).items() if v is not None}
        try:
            resp = await self._client.request(
                method,
                self._url(path),
                json=body,
                params=params,
                headers={"Authorization": authorization},
                timeout=httpx.Timeout(limit, connect=10.0),
            )
        except httpx.TimeoutException:
            raise RestError(0, "timeout", f"{method} {path} took longer than {limit:g} s") from None
        except httpx.HTTPError as exc:
            self._base = None  # the daemon may have restarted on another port
            raise RestError(0, "unreachable", f"{method} {path}: {exc}") from None
        if resp.status_code >= 400:
            raise _error(resp)
        if not resp.content:
            return None
        return resp.json()

    async def stream_lines(self, authorization: str, path: str, body: Any, *, timeout: float) -> AsyncIterator[dict[str, Any]]:
        """POST ``path`` and yield each NDJSON line of the streamed answer as a dict; the
        whole stream is bounded by ``timeout`` seconds by the caller (``trio.fail_after``),
        each read by :attr:`timeout`."""
        read = httpx.Timeout(max(self.timeout, 1.0) if math.isfinite(timeout) else None, connect=10.0)
        try:
            async with self._client.stream("POST", self._url(path), json=body, headers={"Authorization": authorization}, timeout=read) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    raise _error(resp)
                async for line in resp.aiter_lines():
                    if line.strip():
                        yield json.loads(line)
        except httpx.TimeoutException:
            raise RestError(0, "timeout", f"POST {path}: no data for {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise RestError(0, "unreachable", f"POST {path}: {exc}") from None

    async def aclose(self) -> None:
        await self._client.aclose()
