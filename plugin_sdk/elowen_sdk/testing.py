"""A pytest-friendly harness that starts a real Elowen kernel with your plugin enabled.

Requires the ``elowen`` distribution (the kernel) to be installed beside ``elowen-sdk``; it is
imported only when the harness is used. Example (with ``pytest-trio``)::

    import trio.testing
    from elowen_sdk.testing import call, plugin_kernel

    async def test_greet(tmp_path):
        async with plugin_kernel(tmp_path, enable=["hello"]) as kernel:
            tool = kernel.contributions.get("tool", "hello.greet").obj
            assert await call(tool, name="Ada") == "Hello, Ada!"
            kernel.events.publish("test.ping", {})           # on_event observers see it
            await trio.testing.wait_all_tasks_blocked()      # let async observers run
            kernel.store.flush_audit()                       # then read the audit table

The yielded kernel offers ``kernel.contributions``, ``await kernel.bus.mutate(hook, **kw)``,
``kernel.bus.emit(hook, **kw)``, ``kernel.events.publish(type, data)``, ``kernel.store`` and
``kernel.registry``; ``docs/plugins.md`` ("Testing your plugin") describes them.

The kernel gets its own ``ELOWEN_HOME`` under ``tmp_path`` with a real SQLite file. Only the
plugins named in ``enable`` are enabled (builtins included); the others are discovered but
disabled, so your test sees your plugin alone.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from .manifest import MANIFEST_NAME, load_manifest

__all__ = ["call", "plugin_kernel", "source_for_module"]


def source_for_module(module: ModuleType | str, manifest_path: str | Path | None = None) -> Any:
    """A plugin source for a module that is not (yet) installed as an entry point.

    The manifest is ``manifest_path`` or the ``elowen-plugin.toml`` next to the module's file.
    """
    from elowen.core.registry import PluginSource

    mod = importlib.import_module(module) if isinstance(module, str) else module
    path = Path(manifest_path) if manifest_path else Path(inspect.getfile(mod)).parent / MANIFEST_NAME
    manifest = load_manifest(path)
    return PluginSource(name=manifest.name, entry=mod.__name__, loader=lambda: mod, distribution="<test>", manifest=manifest, manifest_path=path)


@asynccontextmanager
async def plugin_kernel(
    tmp_path: str | Path,
    *,
    enable: Iterable[str] = (),
    modules: Iterable[ModuleType | str | tuple[ModuleType | str, str | Path]] = (),
    config: Mapping[str, Mapping[str, Any]] | None = None,
    grant: Mapping[str, Iterable[str]] | None = None,
    entry_points: bool = True,
    **kernel_kwargs: Any,
) -> AsyncIterator[Any]:
    """Start a kernel in ``tmp_path`` and yield it (an ``elowen.core.kernel.Kernel``).

    Args:
        enable: plugin names to enable; every other discovered plugin is disabled.
        modules: plugin modules to add without an entry point (or ``(module, manifest_path)``).
        config: per-plugin config values, ``{"hello": {"greeting": "Hi"}}``.
        grant: extra capabilities to grant, ``{"hello": ["fs.read:/srv"]}``; the required
            capabilities of enabled plugins are granted automatically.
        entry_points: also discover installed plugins (``elowen.plugins`` entry points).
        kernel_kwargs: passed to ``Kernel`` (``hook_timeout``, ``max_hook_failures``…).
    """
    import tomli_w

    from elowen.core.kernel import Kernel
    from elowen.core.registry import entry_point_sources

    home = Path(tmp_path) / "elowen-home"
    home.mkdir(parents=True, exist_ok=True)
    sources = []
    for item in modules:
        mod, path = item if isinstance(item, tuple) else (item, None)
        sources.append(source_for_module(mod, path))
    known = {s.name: s for s in (entry_point_sources() if entry_points else [])}
    known.update({s.name: s for s in sources})
    wanted = set(enable)
    unknown = wanted - set(known)
    if unknown:
        raise LookupError(f"plugins not found: {sorted(unknown)}; discovered: {sorted(known)}")
    plugins: dict[str, Any] = {}
    for name, src in known.items():
        entry: dict[str, Any] = {"enabled": name in wanted}
        if name in wanted:
            manifest = src.manifest or (load_manifest(src.manifest_path) if src.manifest_path else None)
            granted = set(manifest.required) if manifest else set()
            granted |= set((grant or {}).get(name, ()))
            entry["granted"] = sorted(granted)
        if config and name in config:
            entry["config"] = dict(config[name])
        plugins[name] = entry
    (home / "config.toml").write_text(tomli_w.dumps({"plugins": plugins}), encoding="utf-8")
    async with Kernel.open(home, db_path=home / "elowen.db", discover_entry_points=entry_points, sources=sources, **kernel_kwargs) as kernel:
        yield kernel


async def call(handler_owner: Any, /, **kwargs: Any) -> Any:
    """Call a Tool's or Command's handler (sync or async) and return its result."""
    fn = getattr(handler_owner, "handler", handler_owner)
    result = fn(**kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result
