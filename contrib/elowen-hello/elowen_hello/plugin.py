"""The hello plugin's hook implementations."""

from __future__ import annotations

from typing import Any

from elowen_sdk import Command, HTTPError, Patch, Route, Tool, hookimpl

seen_events: list[str] = []
"""Types of the events this plugin observed (module state: the example keeps it simple)."""


@hookimpl
def register_tools(ctx: Any, register: Any) -> None:
    greeting = ctx.config["greeting"]

    def greet(name: str) -> str:
        return f"{greeting}, {name}!"

    register(
        Tool(
            name="hello.greet",
            description="Greet a person by name.",
            handler=greet,
            parameters={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        )
    )


@hookimpl
def register_commands(ctx: Any, register: Any) -> None:
    register(Command(name="hello", description="Say hello.", handler=lambda args="": f"{ctx.config['greeting']} from a plugin! {args}".strip()))


@hookimpl
def on_event(event: Any) -> None:
    seen_events.append(event.type)


@hookimpl
def turn_context(turn: Any) -> Patch:
    return Patch("turn_context", f"(The hello plugin says: greet {turn.user} warmly.)")


@hookimpl
def register_routes(ctx: Any, register: Any) -> None:
    """``GET /plugins/hello/greet/{name}`` (third-party routes mount under /plugins/<name>)."""

    def greet(request: Any) -> dict[str, str]:
        name = request.params["name"]
        if not name.isprintable() or len(name) > 100:
            raise HTTPError(422, "bad_name", "a name is up to 100 printable characters")
        return {"greeting": f"{ctx.config['greeting']}, {name}!", "for": request.principal.name}

    register(Route("GET", "/greet/{name}", greet, summary="Greet someone by name."))
