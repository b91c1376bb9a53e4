"""Refusing requests a web page in the user's browser could make: the ``Host`` check (DNS
rebinding), the ``Origin`` check and JSON-only writes (cross-origin "simple" requests).

A page on another site can make the browser send a "simple" request to the daemon without a
CORS preflight: a ``POST`` whose ``Content-Type`` is ``text/plain``,
``application/x-www-form-urlencoded`` or ``multipart/form-data`` (Fetch Standard, "CORS-safelisted
request-header"), with the page's ``Origin``. It cannot read the answer, but the request acts
(and, on ``POST /auth/login``, counts against the admin's login throttle). A DNS-rebinding page
(``evil.example`` re-pointed at 127.0.0.1) is even same-origin to the browser, but its requests
carry ``Host: evil.example:<port>``.

So, before any handler runs (and before the login throttle counts anything):

* ``Host`` must name the daemon: ``127.0.0.1``, ``localhost``, ``[::1]`` or the host it was
  bound to, with its port or none (HTTP/1.0 requests without ``Host`` pass too: no browser
  sends those), or an entry
  of the allow-list (``[daemon] allowed_hosts = ["elowen.lan", "proxy:8443"]`` in
  ``config.toml`` or ``ELOWEN_ALLOWED_HOSTS=elowen.lan,proxy:8443``; an entry without a port
  allows any port; ``"*"`` turns the check off) — else ``421 misdirected_host``;
* ``Origin``, when sent, must be ``http(s)://`` + an allowed host (same-origin) — else
  ``403 cross_origin`` (``Origin: null``, sent by sandboxed frames and some redirects, too);
* a write (``POST``, ``PUT``, ``PATCH``, ``DELETE``) with a body must say
  ``Content-Type: application/json`` (or ``application/<x>+json``) — else
  ``415 unsupported_media_type``. An empty body needs no type.

WebSocket handshakes get the ``Host`` and ``Origin`` checks (closed with 1008). The CLI, the
web front end (server side) and the SDK send JSON to ``127.0.0.1:<port>`` with no ``Origin``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["ALLOWED_HOSTS_ENV", "HostPolicy", "Refusal", "check_request", "is_json_type", "policy_for"]

ALLOWED_HOSTS_ENV = "ELOWEN_ALLOWED_HOSTS"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_WILDCARD_BINDS = ("", "0.0.0.0", "::")


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is refused: HTTP ``status``, error ``code`` and ``message``."""

    status: int
    code: str
    message: str


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``"name:port"`` / ``"[v6]:port"`` / ``"name"`` → ``(lower-case name, port | None)``;
    ``None`` when malformed."""
    value = value.strip().lower()
    if not value or any(ch.isspace() or ord(ch) < 0x21 or ch in "/\\@?#" for ch in value):
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    elif value.count(":") > 1:  # a bare IPv6 address (allow-list entries only)
        name, port_text = value, None
    else:
        name, _, port_text = value.partition(":")
        port_text = port_text if ":" in value else None
    if port_text is not None:
        if not port_text.isdigit() or len(port_text) > 5 or not 0 < int(port_text) < 65536:
            return None
        return name.rstrip("."), int(port_text)
    return name.rstrip("."), None


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """Which ``Host`` values name this daemon.

    Attributes:
        port: the port it listens on (``None``: any port, for an app not served by
            :func:`elowen.daemon.server.serve`, e.g. in-process tests).
        names: host names allowed with ``port``.
        extra: allow-list entries ``(name, port | None)`` (``None``: any port).
        any_host: the allow-list holds ``"*"`` (no ``Host`` check).
    """

    port: int | None
    names: frozenset[str]
    extra: frozenset[tuple[str, int | None]] = frozenset()
    any_host: bool = False

    def allows(self, host: str | None) -> bool:
        """Whether a ``Host`` header value (``name[:port]``) names this daemon."""
        if self.any_host or not host:  # no Host at all (HTTP/1.0): no browser sends that
            return True
        parsed = _split_host(host)
        if parsed is None:
            return False
        name, port = parsed
        for extra_name, extra_port in self.extra:
            if name == extra_name and (extra_port is None or extra_port == (port or 80)):
                return True
        if name not in self.names:
            return False
        # a bare name (no port) names us too: a browser always sends the port of a non-default
        # one, so a rebinding page's Host is never a bare loopback name
        return self.port is None or port is None or port == self.port

    def allows_origin(self, origin: str) -> bool:
        """Whether an ``Origin`` header value is this daemon's own origin."""
        parts = urlsplit(origin.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/") or parts.query:
            return False
        return self.allows(parts.netloc)


def _entries(values: Iterable[object]) -> tuple[frozenset[tuple[str, int | None]], bool]:
    out: set[tuple[str, int | None]] = set()
    wildcard = False
    for raw in values:
        text = str(raw).strip()
        if not text:
            continue
        if text == "*":
            wildcard = True
            continue
        parsed = _split_host(text)
        if parsed is None:
            raise ValueError(f"allowed_hosts: {text!r} is not a host name or name:port")
        out.add(parsed)
    return frozenset(out), wildcard


def policy_for(bound_host: str | None, port: int | None, settings: Mapping[str, object] | None = None, env: Mapping[str, str] | None = None) -> HostPolicy:
    """The policy of a daemon bound to ``bound_host``:``port`` with ``[daemon]`` settings
    ``settings`` (``allowed_hosts``: list of str) and the environment's
    ``ELOWEN_ALLOWED_HOSTS`` (comma-separated; added to the settings' list).

    Raises:
        ValueError: an allow-list entry that is not ``name`` or ``name:port``.
    """
    env = os.environ if env is None else env
    names = set(LOOPBACK_NAMES)
    host = (bound_host or "").strip().strip("[]").lower()
    if host not in _WILDCARD_BINDS:
        names.add(host)
    listed: list[object] = []
    configured = (settings or {}).get("allowed_hosts")
    if configured is not None:
        if not isinstance(configured, list):
            raise ValueError("daemon.allowed_hosts must be a list of host names")
        listed += configured
    listed += [p for p in env.get(ALLOWED_HOSTS_ENV, "").split(",") if p.strip()]
    extra, wildcard = _entries(listed)
    return HostPolicy(port=port, names=frozenset(names), extra=extra, any_host=wildcard)


def is_json_type(content_type: str | None) -> bool:
    """``application/json`` or ``application/<x>+json`` (parameters such as ``charset``
    ignored)."""
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def check_request(policy: HostPolicy, method: str, headers: Mapping[str, str], body: bytes | None, *, websocket: bool = False) -> Refusal | None:
    """The refusal for a request, or ``None`` when it may go on (see the module docstring)."""
    host = headers.get("Host")
    if not policy.allows(host):
        return Refusal(
            421,
            "misdirected_host",
            f"this daemon does not answer for Host {str(host)[:100]!r}; add it to [daemon] allowed_hosts (or {ALLOWED_HOSTS_ENV}) if it is yours",
        )
    origin = headers.get("Origin")
    if origin is not None and not policy.allows_origin(origin):
        return Refusal(403, "cross_origin", f"requests from the page at {origin[:100]!r} are refused (only same-origin, or no Origin)")
    if not websocket and method.upper() in WRITE_METHODS and body and not is_json_type(headers.get("Content-Type")):
        return Refusal(415, "unsupported_media_type", "send the body as JSON (Content-Type: application/json)")
    return None
