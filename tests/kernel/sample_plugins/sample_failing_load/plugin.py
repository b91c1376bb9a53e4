from elowen_sdk import Tool, hookimpl


@hookimpl
def register_tools(register):
    register(Tool(name="failing.tool", description="never stays", handler=lambda: None))


@hookimpl
def on_load(ctx):
    raise RuntimeError("on_load exploded")
