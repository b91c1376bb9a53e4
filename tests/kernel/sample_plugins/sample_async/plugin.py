from __future__ import annotations

import trio

from elowen_sdk import hookimpl

state: dict = {"events": [], "cancelled": 0}


@hookimpl
async def on_event(ctx, event):
    try:
        await trio.sleep(ctx.config["delay"])
    except trio.Cancelled:
        state["cancelled"] += 1
        raise
    state["events"].append(event.type)
