from elowen_sdk import hookimpl

calls = []


@hookimpl
def on_event(event):
    calls.append(event.type)
    raise ValueError("flaky plugin fails on every event")
