"""Public types a plugin author uses: contributions (Tool, Command, Skill, PromptFragment,
Platform, Executor, Loop, Route, Service), events, and patches returned by mutating hooks.

All are frozen dataclasses with ``__slots__``: cheap to create and safe to share.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import ElowenError

Handler = Callable[..., Any | Awaitable[Any]]
"""A sync function or ``async def`` coroutine function; the kernel awaits the result if needed."""


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool the brain can call.

    Attributes:
        name: unique across all plugins, ``[a-z0-9_.-]+`` (e.g. ``"hello.greet"``).
        description: one or two sentences shown to the model.
        parameters: JSON Schema (draft 2020-12) of the keyword arguments, an ``object`` schema.
        handler: ``handler(**arguments)`` → JSON-serialisable result (sync or async).
        needs_approval: the user must allow each call (unless YOLO is on and the call is not
            destructive).
    """

    name: str
    description: str
    handler: Handler
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    needs_approval: bool = False


@dataclass(frozen=True, slots=True)
class Command:
    """A slash command (``/name args``) available in chat surfaces.

    ``handler(args: str)`` returns the text to show (sync or async).
    """

    name: str
    description: str
    handler: Handler


@dataclass(frozen=True, slots=True)
class Skill:
    """A named, reusable instruction text the brain can load on demand."""

    name: str
    description: str
    text: str


@dataclass(frozen=True, slots=True)
class PromptFragment:
    """Text added to the brain's system prompt. ``order`` sorts fragments (lower first)."""

    name: str
    text: str
    order: int = 100


@dataclass(frozen=True, slots=True)
class Platform:
    """A chat platform adapter (Discord, WhatsApp, a webhook, …), run by the brain.

    The brain calls ``factory(gateway)`` (sync or async) when the plugin is enabled; it returns
    the adapter. ``gateway`` offers ``platform`` (this name) and ``await gateway.turn(
    platform_user, text, *, projects=None) -> list[str]``: one message from the platform's
    sender ``platform_user`` in, the reply texts out (a link code for an unlinked sender;
    approval prompts ask for ``/allow N`` / ``/reject N``). ``projects`` (an iterable of
    project ids, or ``None``, the default) narrows the turn the message starts: its tools, path
    guard and prompt see only those of the linked account's projects; ``None`` means all of
    them. An empty set leaves the turn no project at all. If the adapter has ``async def run()``, it runs in the
    brain's nursery until the plugin (or the brain) is disabled, which cancels it; then its
    optional ``aclose()``/``close()`` is called and ``gateway.turn`` raises ``RuntimeError``.
    Capture your own ``ctx`` from ``register_platforms(ctx, register)`` in the factory. See
    ``docs/plugins.md`` ("Chat platforms").
    """

    name: str
    factory: Handler


@dataclass(frozen=True, slots=True)
class Executor:
    """An executor provider: runs a task on a coding-agent CLI or in-process.

    ``name`` is the executor name used in ``exec:`` specs (``claude``, ``opencode``, ``codex``,
    ``kilo``, ``elowen``, a third party's); ``provider`` is the object implementing it: for a
    coding-agent CLI an :class:`elowen_sdk.providers.Provider` (its aliases and model rule join
    the exec grammar of the ``executors`` registry). See ``docs/plugins.md`` ("Writing a
    provider").
    """

    name: str
    provider: Any

    def check(self) -> None:
        """Check the provider can work (the kernel calls it at registration): calls
        ``provider.check()`` when the provider has one (every
        :class:`elowen_sdk.providers.Provider` does: its ``patterns.toml`` must load).

        Raises:
            ElowenError: the provider cannot work; the message says why.
        """
        check = getattr(self.provider, "check", None)
        if callable(check):
            check()


@dataclass(frozen=True, slots=True)
class Loop:
    """A periodic timer loop run in the owning plugin's nursery.

    ``fn()`` (sync or async) is called every ``interval`` seconds (monotonic clock); an exception
    is logged and the loop goes on. Disabling the plugin stops it.
    """

    name: str
    interval: float
    fn: Handler
    run_at_start: bool = False


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling a plugin route (resolved by the daemon from the bearer token).

    Attributes:
        user_id: the user's id (``None`` for an agent token of a task without an owner).
        name: the user's name (``agent:task:<id>`` for agent tokens).
        role: ``"admin"`` or ``"member"``.
        scope: ``"full"``, or ``"agent"`` for a token bound to one task.
        task_id: the task an agent token is bound to (``None`` for full tokens).
        project_ids: projects a member may see and act on; ``None`` means all (admins).
        token_id: the id of the token the request came with (``None`` when unknown); a
            long-lived stream asks the users service's ``principal(token_id)`` whether it
            still holds.
    """

    user_id: int | None
    name: str
    role: str
    scope: str = "full"
    task_id: int | None = None
    project_ids: frozenset[int] | None = None
    token_id: int | None = None

    @property
    def is_admin(self) -> bool:
        return self.role == "admin" and self.scope == "full"

    def can_see_project(self, project_id: int | None) -> bool:
        """Whether this principal may see things of ``project_id`` (``None``: global)."""
        if self.scope == "agent":
            return False
        return self.project_ids is None or project_id is None or project_id in self.project_ids

    def may_act(self, owner_id: int | None, project_id: int | None = None) -> bool:
        """The one rule for acting on an agent's work (answering its decisions and
        escalations, changing or running its mission, changing or cancelling its task, typing
        into its terminal): an admin, or the owner (``owner_id``, the user who created the
        task or mission) with a full token who still sees ``project_id``. Other members of
        the project may only look; agent tokens never act through this rule."""
        if self.is_admin:
            return True
        return self.scope == "full" and self.user_id is not None and owner_id == self.user_id and self.can_see_project(project_id)


@dataclass(frozen=True, slots=True)
class Request:
    """An HTTP request to a plugin :class:`Route`.

    ``params`` are the path parameters (``/sessions/{name}`` → ``{"name": ...}``, strings),
    ``query`` the query string (last value per key), ``json`` the parsed body or ``None``,
    ``headers`` the request headers (names lower-case; ``Authorization`` included — a plugin
    that calls the daemon's API on the caller's behalf forwards it).
    """

    method: str
    path: str
    params: Mapping[str, str]
    query: Mapping[str, str]
    json: Any
    principal: Principal
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Response:
    """A plugin route's reply when the default (``200`` with the returned value as JSON) does
    not fit.

    With ``stream`` set (an async iterator of ``str`` or ``bytes`` chunks), the body is streamed
    as it is produced with ``content_type`` (e.g. ``text/event-stream`` or
    ``application/x-ndjson``) and no response timeout; ``body`` is then ignored.
    """

    body: Any = None
    status: int = 200
    stream: Any = None
    content_type: str = "application/json"


class HTTPError(ElowenError):
    """Raise from a route handler to answer ``{"error": {"code", "message"}}`` with ``status``
    (400, 401, 403, 404, 409, 422)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Route:
    """An HTTP route served by the daemon while the plugin is enabled.

    ``path`` may hold ``{name}`` parameters. Builtin plugins mount at ``path`` itself;
    third-party plugins under ``/plugins/<plugin name><path>``. Every request is authenticated
    by the daemon first; ``handler(request: Request)`` (sync or async) returns a
    JSON-serialisable value, a :class:`Response`, or raises :class:`HTTPError`. The handler must
    check ``request.principal`` for what it allows.
    """

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
    path: str
    handler: Handler
    summary: str = ""
    anonymous: bool = False


@dataclass(frozen=True, slots=True)
class WebSocketRoute:
    """A WebSocket endpoint served by the daemon while the plugin is enabled (mounted like a
    :class:`Route`). ``handler(ws)`` is async; ``ws`` offers ``principal``, ``params``,
    ``query``, ``await send(str | bytes)``, ``await receive() -> str | bytes`` and
    ``await close(code)``. Registered through ``register_routes`` like routes."""

    path: str
    handler: Handler
    summary: str = ""
    anonymous: bool = False


@dataclass(frozen=True, slots=True)
class Service:
    """A named in-process service one plugin offers to others (e.g. ``"tmux"``).

    Other plugins reach it with ``ctx.service(name)``.
    """

    name: str
    obj: Any


@dataclass(frozen=True, slots=True)
class Event:
    """An event on the kernel's event bus.

    Attributes:
        id: monotonically increasing, durable (the SSE ``id:`` / ``Last-Event-ID``).
        type: dotted type, e.g. ``"task.created"``, ``"signal"``, ``"plugin.enabled"``.
        data: JSON object.
        ts: UTC ISO 8601 timestamp.
        project_id: the project the event belongs to, or ``None`` for global events.
    """

    id: int
    type: str
    data: Mapping[str, Any]
    ts: str
    project_id: int | None = None


PatchOp = Literal["append", "merge", "replace"]


@dataclass(frozen=True, slots=True)
class Patch:
    """What a mutating hook returns to change a value.

    Applied only when the plugin declared (and was granted) ``hook.mutate:<target>``;
    otherwise it is dropped and audited as denied.

    Ops:
        ``append``: list → list + [value]; str → str + value.
        ``merge``: dict → {**dict, **value}.
        ``replace``: the value itself.
    """

    target: str
    value: Any
    op: PatchOp = "append"


def apply_patch(current: Any, patch: Patch) -> Any:
    """Return ``current`` with ``patch`` applied (never mutates ``current``).

    Raises:
        TypeError: the op does not fit the current value's type.
    """
    if patch.op == "replace":
        return patch.value
    if patch.op == "append":
        if isinstance(current, list):
            return [*current, patch.value]
        if isinstance(current, tuple):
            return (*current, patch.value)
        if isinstance(current, str):
            return current + str(patch.value)
        raise TypeError(f"cannot append to {type(current).__name__}")
    if patch.op == "merge":
        if isinstance(current, Mapping) and isinstance(patch.value, Mapping):
            return {**current, **patch.value}
        raise TypeError(f"cannot merge into {type(current).__name__}")
    raise TypeError(f"unknown patch op {patch.op!r}")


@dataclass(frozen=True, slots=True)
class TurnContext:
    """What the ``turn_context`` mutating hook sees and patches (target ``turn_context``).

    ``context`` is the list of extra context strings added to the turn; a plugin appends with
    ``Patch("turn_context", "text")``. ``projects``: the project ids the turn is narrowed to (a
    chat platform's effective scope), a sorted tuple; ``None`` (the default): not narrowed. A
    plugin adding project-bound context (memories of a project) leaves out other projects'.
    """

    conversation_id: str
    user: str
    message: str
    context: tuple[str, ...] = ()
    projects: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the brain is about to make (``before_tool_call``, target ``tool_call``).

    ``projects`` is the set of project ids the turn is narrowed to (a chat platform's
    effective scope, e.g. Discord roles), as a sorted tuple; ``None`` (the default): the
    user's projects, no narrowing. A tool that keeps acting after the turn (a schedule, say)
    must not widen a narrowed turn: refuse, or keep the narrowing.
    """

    tool: str
    arguments: Mapping[str, Any]
    conversation_id: str = ""
    user: str = ""
    projects: tuple[int, ...] | None = None
