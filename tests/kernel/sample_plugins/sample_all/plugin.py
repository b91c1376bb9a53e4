from __future__ import annotations

from elowen_sdk import Command, Executor, Loop, Patch, Platform, PromptFragment, Route, Service, Skill, Tool, hookimpl

results: list = []


@hookimpl
def register_tools(register):
    register(Tool(name="all.tool", description="t", handler=lambda: "tool"))


@hookimpl
def register_commands(register):
    register(Command(name="all", description="c", handler=lambda args="": "command"))


@hookimpl
def register_skills(register):
    register(Skill(name="all.skill", description="s", text="Do it well."))


@hookimpl
def register_prompt_fragments(register):
    register(PromptFragment(name="all.fragment", text="Be brief.", order=5))


@hookimpl
def register_platforms(register):
    register(Platform(name="all-chat", factory=lambda ctx: object()))


@hookimpl
def register_executors(register):
    register(Executor(name="allexec", provider=object()))


@hookimpl
def register_loops(register):
    register(Loop(name="all.loop", interval=3600, fn=lambda: None))


@hookimpl
def register_routes(register):
    register(Route(method="GET", path="/ping", handler=lambda body=None: {"pong": True}))


@hookimpl
def register_services(register):
    register(Service(name="all.service", obj={"ready": True}))


@hookimpl
async def on_tool_result(call, result, error):
    results.append((call.tool, result, error))


@hookimpl
def before_tool_call(call):
    return Patch("tool_call", {"dry_run": True}, op="merge")
