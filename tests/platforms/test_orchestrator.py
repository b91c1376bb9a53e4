"""Fail-open platforms: a raising adapter and a hanging adapter next to a healthy Discord bot
(the real discord.py client against the scripted Discord server). The healthy one connects
and answers, the brain answers web turns, the raising one is shown as ``error`` and audited,
and disabling the hanging one stops it within the bounded close."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from elowen_sdk import Platform, hookimpl
from tests.support.discord_server import DiscordServer
from tests.support.model_server import Reply

from .conftest import CODE_RE, platform_env, secret_file, until

ALICE = "400000000000000001"


class Raising:
    async def run(self) -> None:
        await trio.sleep(0.1)
        raise RuntimeError("the platform's server refused us")


class Hanging:
    """Never finishes starting, and its close hangs too (bounded by the brain)."""

    closed = False

    async def run(self) -> None:
        await trio.sleep_forever()

    async def aclose(self) -> None:
        Hanging.closed = True
        await trio.sleep_forever()


async def hanging_factory(gateway: Any) -> Hanging:
    await trio.sleep(0.05)
    return Hanging()


def _module(tmp_path: Path, name: str, factory: Any) -> tuple[types.ModuleType, Path]:
    module = types.ModuleType(f"elowen_test_platform_{name}")

    @hookimpl
    def register_platforms(ctx: Any, register: Any) -> None:
        register(Platform(name, factory))

    module.register_platforms = register_platforms  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    manifest = tmp_path / f"{name}-plugin.toml"
    manifest.write_text(
        f'name = "{name}"\nversion = "0.1.0"\napi = "1"\nentry = "{module.__name__}"\n'
        f'description = "test platform"\n[contributes]\nplatforms = ["{name}"]\nhooks = ["register_platforms"]\n'
    )
    return module, manifest


@contextmanager
def modules(tmp_path: Path) -> Iterator[list[tuple[types.ModuleType, Path]]]:
    made = [_module(tmp_path, "raising", lambda gateway: Raising()), _module(tmp_path, "hanging", hanging_factory)]
    try:
        yield made
    finally:
        for module, _ in made:
            sys.modules.pop(module.__name__, None)


@pytest.mark.slow
async def test_a_raising_and_a_hanging_adapter_do_not_stall_a_healthy_one_or_the_brain(tmp_path: Path) -> None:
    token = secret_file(tmp_path / "token", "bot-token-123456")
    with DiscordServer() as server, modules(tmp_path) as extra:
        cfg = {"token_file": str(token), "api_base": server.api_base, "gateway_url": server.gateway_url, "pairing": True, "edit_interval": 0.3}
        async with platform_env(tmp_path, "discord", cfg, enable_more=["raising", "hanging"], modules=extra) as env:
            await until(lambda: env.platform("raising").get("state") == "error", what="the raising adapter shown as error")
            assert "refused us" in env.platform("raising")["error"]
            await until(lambda: env.platform("discord").get("state") == "connected", what="the healthy bot connected")
            assert env.platform("hanging")["state"] in ("starting", "running")
            audits = env.audit("platform.error")
            assert [(a["actor"], a["target"], a["outcome"]) for a in audits] == [("plugin:raising", "raising", "error")]

            # the healthy platform answers
            env.script(fallback=Reply(text="Healthy and answering."))
            server.message(ALICE, "link", dm=True)
            dm = "6" + ALICE[1:]
            text = await until(lambda: next((t for t in server.texts(dm) if CODE_RE.search(t)), None), what="a link code")
            env.brain.link_channel(env.admin, CODE_RE.search(text).group(1))  # type: ignore[union-attr]
            server.message(ALICE, "hello", mention=True)
            await until(lambda: "Healthy and answering." in server.texts("700000000000000001"), what="the healthy reply")
            # the brain answers a web turn meanwhile
            with trio.fail_after(30):
                result = await env.brain.turn(env.admin, None, "and on the web?")
            assert result["messages"][-1]["content"] == "Healthy and answering."

            # disabling the hanging plugin returns; its hanging close is cut off
            with trio.fail_after(30):
                await env.kernel.registry.disable("hanging")
            await until(lambda: Hanging.closed and not env.platform("hanging"), what="the hanging platform stopped")
            assert env.platform("discord")["state"] == "connected"
