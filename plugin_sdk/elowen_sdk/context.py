"""The interfaces a plugin receives from the kernel: :class:`PluginContext` and
:class:`PathGuard`. The kernel provides the implementations; these protocols are what a
plugin may rely on under plugin API ``"1"``."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar, overload, runtime_checkable

# ``Callable[..., _S]`` rather than ``type[_S]``: mypy refuses a protocol class where
# ``type[_S]`` is expected (error code ``type-abstract``), and contracts are protocols.
_S = TypeVar("_S")


@runtime_checkable
class PathGuard(Protocol):
    """Pins a plugin's file access to its granted roots.

    Every method raises :class:`~elowen_sdk.errors.PathGuardError` for a path outside the
    roots, a ``..`` escape, a symlink (or symlinked parent) that points out, or a NUL byte.
    The file helpers open the file by walking from the root with ``O_NOFOLLOW`` directory
    descriptors, so a path swapped for a symlink between check and use is refused too.
    """

    @property
    def read_roots(self) -> tuple[Path, ...]: ...

    @property
    def write_roots(self) -> tuple[Path, ...]: ...

    def resolve(self, path: str | Path, *, write: bool = False) -> Path:
        """The real absolute path, checked. Relative paths are taken from the first root."""
        ...

    def read_bytes(self, path: str | Path, *, limit: int | None = None) -> bytes: ...

    def read_text(self, path: str | Path, encoding: str = "utf-8") -> str: ...

    def write_bytes(self, path: str | Path, data: bytes) -> int: ...

    def write_text(self, path: str | Path, text: str, encoding: str = "utf-8") -> int: ...

    def listdir(self, path: str | Path = ".") -> list[str]: ...

    def mkdir(self, path: str | Path) -> Path: ...


class PluginContext(Protocol):
    """One per plugin; passed as ``ctx`` to every hook.

    Attributes:
        name: the plugin's name (from its manifest).
        config: read-only, validated config (defaults overlaid with the user's settings).
        log: logger ``elowen.plugin.<name>``.
        guard: the plugin's :class:`PathGuard`.
        data_dir: ``$ELOWEN_HOME/plugins/<name>/`` (created on first use, always a guard root).
        generation: the registry's generation counter; changes whenever any plugin is enabled,
            disabled or reconfigured, so long-lived consumers can tell a snapshot is stale.
    """

    name: str
    config: Mapping[str, Any]
    log: logging.Logger
    guard: PathGuard
    data_dir: Path

    @property
    def generation(self) -> int: ...

    def has(self, capability: str) -> bool:
        """Whether the plugin holds ``capability`` (declared and granted)."""
        ...

    def require(self, capability: str, action: str = "") -> None:
        """Raise :class:`~elowen_sdk.errors.CapabilityError` unless the plugin holds it."""
        ...

    def path_guard(
        self, read_roots: Iterable[str | os.PathLike[str]], write_roots: Iterable[str | os.PathLike[str]] = (), *, base: str | os.PathLike[str] | None = None
    ) -> PathGuard:
        """A new :class:`PathGuard` over other folders (e.g. a user's project folders for the
        tools of a conversation): ``write_roots`` are readable too; relative paths start at
        ``base`` (default: the first write root, else the first read root). It confines the
        plugin's own file helpers; it grants nothing.

        Raises:
            ValueError: no roots at all, or ``base`` outside them.
        """
        ...

    @property
    def settings(self) -> Mapping[str, Any]:
        """The kernel's settings (``config.toml``) as last loaded, read-only."""
        ...

    def update_settings(self, mutator: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Change ``config.toml`` (validated, written atomically, reconciled); needs
        ``settings.write``."""
        ...

    def contributions(self, kind: str) -> Mapping[str, Any]:
        """Snapshot of all enabled plugins' contributions of ``kind`` (name → record with
        ``plugin``, ``name``, ``obj``)."""
        ...

    def has_impls(self, hook: str) -> bool:
        """Whether any enabled plugin implements ``hook``."""
        ...

    @property
    def store(self) -> Any:
        """The kernel store (needs ``store``)."""
        ...

    def publish(self, type: str, data: Mapping[str, Any], project_id: int | None = None) -> int:
        """Publish an event; returns its id (needs ``events.publish``)."""
        ...

    def start_soon(self, fn: Callable[..., Any], *args: Any, name: str | None = None) -> None:
        """Run ``fn(*args)`` in the plugin's nursery; cancelled when the plugin is disabled."""
        ...

    @overload
    def service(self, contract: Callable[..., _S], /) -> _S: ...

    @overload
    def service(self, contract: str, /) -> Any: ...

    def service(self, contract: Any, /) -> Any:
        """Another plugin's (or the daemon's) service, by contract or by name.

        ``ctx.service(TmuxService)`` takes the service name from the contract
        (:func:`~elowen_sdk.contracts.service_contract`) and is typed as that protocol;
        ``ctx.service("tmux")`` is the untyped form. Needs capability ``service:<name>``.
        Look the service up when you use it rather than keeping it: a provider that is disabled
        and enabled again offers a new object (``on_service`` tells when).

        Raises:
            CapabilityError: the plugin does not hold ``service:<name>``.
            ServiceUnavailable: no enabled plugin offers it now (a ``LookupError``).
            TypeError: ``contract`` is neither a name nor a service contract.
        """
        ...

    def emit(self, hook: str, **kwargs: Any) -> None:
        """Emit an observational hook to every enabled plugin."""
        ...

    async def mutate(self, hook: str, **kwargs: Any) -> Any:
        """Run a mutating hook with its arguments (e.g. ``turn=TurnContext(...)``); returns the
        hook's object after every allowed patch."""
        ...
