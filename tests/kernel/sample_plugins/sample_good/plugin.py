from __future__ import annotations

import trio

from elowen_sdk import Loop, Patch, Tool, hookimpl

state: dict = {"sync_events": [], "async_events": [], "loaded": 0, "unloaded": 0, "ticks": 0, "config": None}


@hookimpl
def on_load(ctx):
    state["loaded"] += 1
    state["config"] = dict(ctx.config)


@hookimpl
async def on_unload(ctx):
    await trio.sleep(0)
    state["unloaded"] += 1


@hookimpl
def register_tools(ctx, register):
    register(Tool(name="good.echo", description="Echo.", handler=lambda text: f"{ctx.config['word']}: {text}"))


@hookimpl
def register_loops(ctx, register):
    def tick():
        state["ticks"] += 1

    register(Loop(name="good.tick", interval=0.01, fn=tick, run_at_start=True))


@hookimpl
def on_event(event):
    state["sync_events"].append(event.type)


class AsyncSide:
    """A second hookimpl object would need its own plugin; async impl lives here as a function."""


@hookimpl
def turn_context(ctx, turn):
    return Patch("turn_context", f"good:{ctx.config['word']}")
