"""The default model behaviour, steered by the prompt text, and helpers for custom scripts."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ._types import ParsedRequest, Reply, ToolCall


def shell_tool_call(request: ParsedRequest, command: str) -> ToolCall:
    """A call of the shell tool offered in ``request``, named and shaped as each CLI expects.

    ``Bash`` {command, description} (Claude Code), ``exec_command`` {cmd, sandbox_permissions:
    "require_escalated", justification} (Codex 0.171: under ``approval_policy = "on-request"`` it
    asks the user only for escalated commands; ``justification`` is shown as "Reason:"),
    ``bash`` {command, description} (OpenCode, Kilo), ``run_shell_command`` {command,
    description} (Gemini CLI 0.61.0). Raises ``ValueError`` when the request
    offers none of them.
    """
    description = "Run a shell command (fake model)"
    if "Bash" in request.tool_names:
        return ToolCall("Bash", {"command": command, "description": description})
    if "exec_command" in request.tool_names:
        return ToolCall(
            "exec_command",
            {
                "cmd": command,
                "sandbox_permissions": "require_escalated",
                "justification": f"Fake model wants to run: {command}",
            },
        )
    if "bash" in request.tool_names:
        return ToolCall("bash", {"command": command, "description": description})
    if "run_shell_command" in request.tool_names:
        return ToolCall("run_shell_command", {"command": command, "description": description})
    raise ValueError(f"no known shell tool among {request.tool_names!r}")


def example_for_schema(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> Any:
    """A small value that satisfies a simple JSON schema (enum/const, object, array, scalars, $ref).

    String fields named ``title`` get ``"Fake session title"``; other strings ``"fake"``.
    """
    root = root if root is not None else schema
    return _example(schema, root, "")


def _example(schema: Mapping[str, Any], root: Mapping[str, Any], key: str) -> Any:
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return _example(target, root, key)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for combinator in ("anyOf", "oneOf", "allOf"):
        if schema.get(combinator):
            return _example(schema[combinator][0], root, key)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: _example(sub, root, name) for name, sub in props.items()}
    if kind == "array":
        count = int(schema.get("minItems", 1))
        return [_example(schema.get("items") or {}, root, key) for _ in range(count)]
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    text = "Fake session title" if key == "title" else "fake"
    return text.ljust(int(schema.get("minLength", 0)), "x")


_RUN = re.compile(r"RUN:\s*(.+?)(?=\s+RUN:|\s+SLOW\b|\s+ERROR:\d{3}\b|$)", re.MULTILINE)
_ERROR = re.compile(r"\bERROR:(\d{3})\b")


class DefaultScript:
    """The default model behaviour, steered by the prompt text.

    * A request without tools (the CLIs' title requests) → a title: ``"Fake session title"``, or
      when a JSON schema is requested, :func:`example_for_schema` of it as JSON text.
    * ``ERROR:NNN`` in the prompt → HTTP status NNN with an authentication/API error body.
    * ``RUN: <cmd>`` (one or more; each ends at the next ``RUN:``, ``SLOW``, or end of line) → for
      the i-th reply after the prompt (i = tool results seen since it), if a command i remains:
      ``"FAKE: I will run a shell command."`` plus :func:`shell_tool_call` for it; otherwise
      ``"FAKE: done."``. Without ``RUN:`` → ``"FAKE: ok."``.
    * ``SLOW`` in the prompt → every reply to a tool-bearing request is delayed by ``slow_delay``
      seconds.
    """

    title = "Fake session title"

    def __init__(self, *, slow_delay: float = 3.0) -> None:
        self.slow_delay = slow_delay

    def __call__(self, request: ParsedRequest) -> Reply:
        if not request.has_tools:
            if request.json_schema is not None:
                return Reply(text=json.dumps(example_for_schema(request.json_schema)))
            return Reply(text=self.title)
        prompt = request.prompt
        error = _ERROR.search(prompt)
        if error:
            status = int(error.group(1))
            return Reply(status=status, error_message=f"Fake model server error {status}")
        delay = self.slow_delay if re.search(r"\bSLOW\b", prompt) else 0.0
        commands = [m.strip() for m in _RUN.findall(prompt)]
        step = len(request.tool_results)
        if step < len(commands):
            return Reply(
                text="FAKE: I will run a shell command.",
                tool_calls=(shell_tool_call(request, commands[step]),),
                delay=delay,
            )
        return Reply(text="FAKE: done." if commands else "FAKE: ok.", delay=delay)
