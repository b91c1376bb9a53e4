"""A minimal MCP server over stdio (newline-delimited JSON-RPC 2.0) with one tool, ``echo``.

Used to make a real coding-agent CLI draw its MCP tool permission prompt
(``tests/support/capture.py``). Standard library only, so any ``python3`` can run it:
``python3 tests/support/mcp_echo_server.py``. Methods: ``initialize``, ``tools/list``,
``tools/call`` (``echo`` returns its ``text`` argument), ``ping``; notifications are ignored,
other methods answer error -32601.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = [
    {
        "name": "echo",
        "description": "Echo the given text back",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    }
]


def answer(msg: dict[str, Any]) -> dict[str, Any] | None:
    """The response to one request (``None`` for a notification)."""
    if "id" not in msg:
        return None
    method, rid = msg.get("method"), msg["id"]
    if method == "initialize":
        version = (msg.get("params") or {}).get("protocolVersion") or "2024-11-05"
        result: dict[str, Any] = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": "demo", "version": "1.0.0"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        text = str(((msg.get("params") or {}).get("arguments") or {}).get("text", ""))
        result = {"content": [{"type": "text", "text": text}]}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"unknown method {method}"}}
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def main() -> None:
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            reply = answer(json.loads(line))
        except ValueError:
            continue
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
