"""Exceptions a plugin author may see or raise. One hierarchy, rooted at :class:`ElowenError`.

Besides the kernel's own errors, this module holds the errors of the builtin services that
consumers catch (``tmux``, ``inference``, ``tasks``, ``users``): the provider raises these very
classes, so a consumer catches them without importing the provider's package. The service modules
(:mod:`elowen_sdk.services.tmux`, :mod:`elowen_sdk.chat`…) re-export the ones of their domain.
"""

from __future__ import annotations

__all__ = [
    "BadResponse",
    "CapabilityError",
    "ConfigError",
    "ContextTooLong",
    "ControlClientClosed",
    "ElowenError",
    "InferenceError",
    "InvalidNameError",
    "LocalModelUnavailable",
    "ManifestError",
    "PathGuardError",
    "ProviderConfigError",
    "ProviderConnectionError",
    "ProviderHTTPError",
    "ProviderTimeout",
    "ServiceUnavailable",
    "SessionExistsError",
    "SessionNotFoundError",
    "SubmitNotConfirmed",
    "TaskConflict",
    "TaskError",
    "TaskNotFound",
    "TmuxCommandError",
    "TmuxError",
    "UnknownProvider",
    "UserNotFound",
]


class ElowenError(Exception):
    """Base of every Elowen error."""


class ManifestError(ElowenError):
    """An ``elowen-plugin.toml`` is missing, unreadable, or does not match the schema."""


class CapabilityError(ElowenError):
    """A plugin used a kernel API that needs a capability its manifest did not declare
    (or the user did not grant)."""

    def __init__(self, plugin: str, capability: str, action: str = "", *, declared: bool = False) -> None:
        self.plugin = plugin
        self.capability = capability
        self.declared = declared
        """Whether the manifest declares it (then only the user's grant is missing)."""
        what = f" to {action}" if action else ""
        if declared:
            fix = f"its manifest declares it but it is not granted; grant it: elowen plugin grant {plugin} {capability}"
        else:
            fix = "declare it in elowen-plugin.toml and grant it"
        super().__init__(f"plugin {plugin!r} needs capability {capability!r}{what}; {fix}")


class PathGuardError(ElowenError, PermissionError):
    """A path was refused by a plugin's path guard (outside its roots, ``..`` escape,
    symlink escape, NUL byte, or not writable under the granted capabilities)."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"path refused: {path!r}: {reason}")


class ConfigError(ElowenError, ValueError):
    """A plugin config value or a settings file failed validation."""


# -- tmux (service "tmux"; raised by the tmux plugin, caught by its consumers) ------------------


class TmuxError(ElowenError):
    """Base of every error of the ``tmux`` service (tmux missing, server not reachable, …)."""


class InvalidNameError(TmuxError, ValueError):
    """A session name is not from the safe alphabet ``[A-Za-z0-9_-]`` (or is reserved)."""


class TmuxCommandError(TmuxError):
    """tmux answered a command with ``%error``.

    Attributes:
        command: the command line as sent (argument vector).
        message: tmux's error text, e.g. ``"can't find session: x"``.
    """

    def __init__(self, command: tuple[str, ...], message: str) -> None:
        self.command = command
        self.message = message
        super().__init__(f"tmux {command[0] if command else '?'}: {message}")


class SessionExistsError(TmuxError):
    """``spawn`` was asked for a session name that already exists."""


class SessionNotFoundError(TmuxError, LookupError):
    """The target session or pane does not exist."""


class ControlClientClosed(TmuxError):
    """The control-mode client exited (server killed, session gone) before replying."""


class SubmitNotConfirmed(TmuxError):
    """``send_text(verify=True)``: the text still showed in the composer after Enter was
    pressed twice, so submission could not be confirmed."""


# -- inference (service "inference"; raised by the relay, caught by its consumers) --------------
# Messages never contain an API key: only provider names, URLs, HTTP statuses and (truncated)
# response bodies.


class InferenceError(ElowenError):
    """Base of every error raised by the ``inference`` service."""


class UnknownProvider(InferenceError, LookupError):
    """A spec names a provider that is not configured (or a spec is malformed / missing)."""


class ProviderConfigError(InferenceError, ConfigError):
    """A provider's settings are invalid (unknown kind, bad URL, key env var not set…)."""


class ProviderHTTPError(InferenceError):
    """The provider answered with an HTTP error status (after any retries).

    Attributes:
        status: the HTTP status code.
        body: the response body as text, truncated to 2,000 characters.
        provider: the provider's name.
    """

    def __init__(self, status: int, body: str, *, provider: str = "", detail: str = "") -> None:
        self.status = status
        self.body = body[:2000]
        self.provider = provider
        where = f"{provider}: " if provider else ""
        super().__init__(f"{where}HTTP {status}: {detail or self.body[:300]}")


class ProviderTimeout(InferenceError, TimeoutError):
    """The provider did not answer within the provider's ``timeout`` (seconds, per read)."""


class ProviderConnectionError(InferenceError, ConnectionError):
    """The provider could not be reached (after any retries)."""


class BadResponse(InferenceError):
    """The provider's answer does not have the protocol's shape (or a stream broke off)."""


class ContextTooLong(InferenceError, ValueError):
    """The request does not fit the model's context window (the message gives both sizes)."""


class LocalModelUnavailable(InferenceError):
    """The embedded local model cannot run: llama-cpp-python or the model file is missing.
    The message says what to install."""


# -- users (host service "users") ---------------------------------------------------------------


class UserNotFound(ElowenError, LookupError):
    """No such user (or a project or task a call about users refers to)."""


# -- tasks (host service "tasks") ---------------------------------------------------------------


class TaskError(ElowenError):
    """Base of the errors of the ``tasks`` service."""


class TaskNotFound(TaskError, LookupError):
    """No such task (or referenced project, parent or dependency)."""


class TaskConflict(TaskError):
    """The change conflicts with the task's state or graph (a transition not allowed, a
    dependency cycle)."""


class ServiceUnavailable(ElowenError, LookupError):
    """``ctx.service(...)`` named a service that no enabled plugin (nor the daemon) offers now.

    Attributes:
        service: the service name.
    """

    def __init__(self, service: str, detail: str = "") -> None:
        self.service = service
        super().__init__(f"service {service!r} is not available{': ' + detail if detail else ''}")
