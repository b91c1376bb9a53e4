"""The exec resolver a test's own task service uses: the ``executors`` service of the agents
plugin when it is enabled (as in the daemon), else the grammar over the executors the enabled
plugins registered (a kernel with only the brain, say)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from elowen_builtins.agents.execspec import Grammar, entry_of, exec_settings
from elowen_sdk.services.executors import ResolvedExec


def kernel_resolver(kernel: Any) -> Callable[[str | None], ResolvedExec]:
    """``spec -> ResolvedExec`` over ``kernel``'s enabled plugins, looked up at each call."""

    def resolve(spec: str | None) -> ResolvedExec:
        owned = kernel.contributions.all("service").get("executors")
        if owned is not None:
            return owned.obj.obj.resolve(spec)  # type: ignore[no-any-return]
        grammar = Grammar(entry_of(n, o.plugin, o.obj.provider) for n, o in kernel.contributions.all("executor").items())
        settings = exec_settings(kernel.settings.data.get("execs"))
        return grammar.resolve(spec, fallback=settings.fallback, allow_plain=settings.plain)

    return resolve


def builtin_resolver(*, fallback: str = "sonnet", plain: tuple[str, ...] = ()) -> Callable[[str | None], ResolvedExec]:
    """``spec -> ResolvedExec`` over the four builtin CLI providers and the brain's ``elowen``
    (their real classes), for a task service tested without a kernel."""
    from elowen_builtins.brain.worker import BrainWorker
    from elowen_builtins.claude_code.plugin import ClaudeProvider
    from elowen_builtins.codex.plugin import CodexProvider
    from elowen_builtins.kilo.plugin import KiloProvider
    from elowen_builtins.opencode.plugin import OpenCodeProvider

    plugins = {"claude": "claude-code", "codex": "codex", "opencode": "opencode", "kilo": "kilo"}
    entries = [entry_of(c.name, plugins[c.name], c({}, plugin=plugins[c.name])) for c in (ClaudeProvider, CodexProvider, OpenCodeProvider, KiloProvider)]
    grammar = Grammar([*entries, entry_of("elowen", "brain", BrainWorker)])
    return lambda spec: grammar.resolve(spec, fallback=fallback, allow_plain=plain)
