"""The hook specifications of plugin API ``"1"``.

Every hook takes ``ctx`` (the calling plugin's own :class:`~elowen_sdk.context.PluginContext`)
as its first argument; an implementation may leave out any argument it does not use (pluggy
rule), so ``def on_event(event): ...`` is valid.

Four kinds, listed in :data:`HOOK_KINDS`:

* ``lifecycle`` — called for one plugin only, when it is enabled (``on_load``) or disabled
  (``on_unload``). Sync or async.
* ``contribution`` — ``register_*(ctx, register)``: call ``register(obj)`` for each contribution.
  Sync, cheap, called once per enable. Everything registered is owned by the plugin and removed
  when it is disabled.
* ``observational`` — every implementation runs; async ones concurrently, each under the
  per-hook timeout (default 2 s); fail-open: an exception or timeout is logged, audited and
  skipped; return values are ignored.
* ``mutating`` — implementations run one after another in pluggy's order (LIFO of registration,
  ``tryfirst``/``trylast`` honoured); each may return a :class:`~elowen_sdk.types.Patch` (or
  ``None``). A patch is applied only when the plugin holds ``hook.mutate:<target>``
  (:data:`MUTATING_TARGETS`); otherwise it is dropped and audited as ``denied``.
"""

from __future__ import annotations

from typing import Any

from ._markers import hookspec

API_VERSION = "1"

# ---------------------------------------------------------------- lifecycle


@hookspec
def on_load(ctx: Any) -> None:
    """The plugin was enabled: its contributions are registered; start background work here
    with ``ctx.start_soon``. Raising puts the plugin in state ``error`` (traceback kept)."""


@hookspec
def on_unload(ctx: Any) -> None:
    """The plugin is being disabled, after its nursery was cancelled and before its
    contributions are removed. Release outside resources here. Errors are logged, not raised."""


# ---------------------------------------------------------------- contribution


@hookspec
def register_tools(ctx: Any, register: Any) -> None:
    """``register(Tool(...))`` for each brain tool the plugin offers."""


@hookspec
def register_commands(ctx: Any, register: Any) -> None:
    """``register(Command(...))`` for each slash command."""


@hookspec
def register_skills(ctx: Any, register: Any) -> None:
    """``register(Skill(...))`` for each skill text."""


@hookspec
def register_prompt_fragments(ctx: Any, register: Any) -> None:
    """``register(PromptFragment(...))`` for each system-prompt fragment."""


@hookspec
def register_platforms(ctx: Any, register: Any) -> None:
    """``register(Platform(...))`` for each chat platform adapter."""


@hookspec
def register_executors(ctx: Any, register: Any) -> None:
    """``register(Executor(...))`` for each executor provider (``exec:`` spec prefix)."""


@hookspec
def register_loops(ctx: Any, register: Any) -> None:
    """``register(Loop(...))`` for each periodic loop; it runs in the plugin's nursery."""


@hookspec
def register_routes(ctx: Any, register: Any) -> None:
    """``register(Route(...))`` for each HTTP route, mounted under ``/plugins/<name>/``."""


@hookspec
def register_services(ctx: Any, register: Any) -> None:
    """``register(Service(name, obj))`` for each service offered to other plugins."""


@hookspec
def register_decision_paths(ctx: Any, register: Any) -> None:
    """``register(DecisionPath(...))`` for each decision path the plugin offers the overseer
    (:class:`~elowen_sdk.services.missions.DecisionPath`: ``async propose(request) -> Proposal |
    None``; ``None`` = the path submits later through ``MissionsService.submit``). Declared in
    the manifest as ``[contributes] decision_paths``."""


# ---------------------------------------------------------------- observational


@hookspec
def on_event(ctx: Any, event: Any) -> None:
    """Every event published on the kernel's event bus (:class:`~elowen_sdk.types.Event`)."""


@hookspec
def on_tool_result(ctx: Any, call: Any, result: Any, error: str | None) -> None:
    """A brain tool call finished. ``call`` is a :class:`~elowen_sdk.types.ToolCall`;
    ``result`` its JSON result (``None`` on error); ``error`` the error message or ``None``."""


@hookspec
def on_service(ctx: Any, name: str, available: bool) -> None:
    """Service ``name`` became available (``available=True``: its provider finished
    ``on_load``, or the daemon registered it) or is about to go away (``False``: its provider is
    being disabled; it can still be used during this call). A plugin enabled after a service
    appeared is told of it (``available=True``) right after its own ``on_load``. Lets a plugin
    that uses a service optionally react instead of polling. The kernel waits for async implementations (each under
    the hook timeout) before it goes on."""


# ---------------------------------------------------------------- mutating


@hookspec
def turn_context(ctx: Any, turn: Any) -> Any:
    """Before a brain turn: return ``Patch("turn_context", "text")`` to append context
    (a :class:`~elowen_sdk.types.TurnContext` is passed). Needs ``hook.mutate:turn_context``."""


@hookspec
def before_tool_call(ctx: Any, call: Any) -> Any:
    """Before a brain tool call: return ``Patch("tool_call", {...}, op="merge")`` to change its
    arguments. Needs ``hook.mutate:tool_call``."""


@hookspec
def intake(ctx: Any, turn: Any) -> Any:
    """Before a user's chat turn, before any model call: return ``Patch("intake", "reply")`` to
    claim the message — the brain stores the user message and the appended replies as its
    answer and makes no model call (a :class:`~elowen_sdk.types.TurnContext` is passed; its
    ``context`` collects the replies). Return ``None`` to let the ordinary turn run. Not called
    for brain-worker or goal turns. Needs ``hook.mutate:intake``."""


HOOK_KINDS: dict[str, str] = {
    "on_load": "lifecycle",
    "on_unload": "lifecycle",
    "register_tools": "contribution",
    "register_commands": "contribution",
    "register_skills": "contribution",
    "register_prompt_fragments": "contribution",
    "register_platforms": "contribution",
    "register_executors": "contribution",
    "register_loops": "contribution",
    "register_routes": "contribution",
    "register_services": "contribution",
    "register_decision_paths": "contribution",
    "on_event": "observational",
    "on_tool_result": "observational",
    "on_service": "observational",
    "turn_context": "mutating",
    "before_tool_call": "mutating",
    "intake": "mutating",
}
"""Hook name → kind (``lifecycle``, ``contribution``, ``observational``, ``mutating``)."""

MUTATING_TARGETS: dict[str, str] = {
    "turn_context": "turn_context",
    "before_tool_call": "tool_call",
    "intake": "intake",
}
"""Mutating hook name → the target named in its ``hook.mutate:<target>`` capability."""

MUTATING_FIELDS: dict[str, tuple[str, str]] = {
    "turn_context": ("turn", "context"),
    "before_tool_call": ("call", "arguments"),
    "intake": ("turn", "context"),
}
"""Mutating hook name → (the argument carrying the object, the field a patch changes)."""

CONTRIBUTION_KINDS: dict[str, str] = {
    "register_tools": "tool",
    "register_commands": "command",
    "register_skills": "skill",
    "register_prompt_fragments": "prompt_fragment",
    "register_platforms": "platform",
    "register_executors": "executor",
    "register_loops": "loop",
    "register_routes": "route",
    "register_services": "service",
    "register_decision_paths": "decision_path",
}
"""Contribution hook name → the ledger kind of what it registers."""
