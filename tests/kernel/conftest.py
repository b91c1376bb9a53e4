"""Fixtures for the kernel tests: sample plugins as plugin sources, and a kernel factory."""

from __future__ import annotations

import importlib
import sys
import tomllib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from elowen.core.kernel import Kernel
from elowen.core.registry import PluginSource

SAMPLES = Path(__file__).parent / "sample_plugins"
if str(SAMPLES) not in sys.path:
    sys.path.insert(0, str(SAMPLES))


def sample(pkg: str, *, distribution: str = "samples", version: str = "1.0.0") -> PluginSource:
    """A plugin source for ``tests/kernel/sample_plugins/<pkg>`` (nothing imported yet)."""
    path = SAMPLES / pkg / "elowen-plugin.toml"
    name = tomllib.loads(path.read_text())["name"]
    return PluginSource(
        name=name,
        entry=f"{pkg}.plugin",
        loader=lambda: importlib.import_module(f"{pkg}.plugin"),
        distribution=distribution,
        dist_version=version,
        manifest_path=path,
    )


@pytest.fixture
def reset_samples() -> None:
    """Sample plugins keep module state; reset it for each test."""
    for pkg in ("sample_good", "sample_async", "sample_flaky"):
        mod = sys.modules.get(f"{pkg}.plugin")
        if mod is None:
            continue
        state = getattr(mod, "state", None)
        if isinstance(state, dict):
            for key, value in state.items():
                state[key] = [] if isinstance(value, list) else (0 if isinstance(value, int) else None)
        if hasattr(mod, "calls"):
            mod.calls.clear()


@pytest.fixture
def open_kernel(tmp_path: Path, reset_samples: None) -> Callable[..., AsyncIterator[Kernel]]:
    """``async with open_kernel("sample_good", ...) as kernel`` — a real kernel in tmp_path
    with the given sample plugins as its only sources."""

    @asynccontextmanager
    async def factory(*pkgs: str, **kwargs) -> AsyncIterator[Kernel]:
        sources = [sample(p) for p in pkgs]
        async with Kernel.open(tmp_path / "home", db_path=tmp_path / "elowen.db", discover_entry_points=False, sources=sources, **kwargs) as kernel:
            yield kernel

    return factory
