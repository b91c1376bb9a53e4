"""A stdio MCP server for the tests, written with the official SDK (``mcp`` 2.3 ``MCPServer``).

``python calc_server.py MODE``: ``ok`` serves ``add``, ``env_names`` and ``slow``; ``hang``
serves a ``wait`` tool that never answers; ``notes`` serves ``add`` and two text resources
(``notes://readme``, ``notes://todo``); ``crash`` serves a ``boom`` tool that kills the
process (exit status 3) when called; ``dead`` exits at once, before speaking MCP; ``mute``
reads its input and never answers anything, ``initialize`` included.
"""

from __future__ import annotations

import logging
import os
import sys
import time

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)  # before MCPServer() (it would install Rich)

from mcp.server.mcpserver import MCPServer  # noqa: E402

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
if mode == "dead":
    sys.exit(2)
if mode == "mute":
    for _line in sys.stdin:  # a process that speaks nothing
        pass
    sys.exit(0)
server = MCPServer("calc")

if mode == "ok":

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def env_names() -> list[str]:
        """The names of the environment variables this process got."""
        return sorted(os.environ)

    @server.tool()
    def secret_digest() -> str:
        """Whether the secret CALC_TOKEN arrived (its length, never its value)."""
        return f"CALC_TOKEN has {len(os.environ.get('CALC_TOKEN', ''))} characters"

elif mode == "notes":

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.resource("notes://readme", name="readme", description="What these notes are", mime_type="text/plain")
    def readme() -> str:
        return "The notes of the test server: buy milk."

    @server.resource("notes://todo", name="todo", mime_type="text/plain")
    def todo() -> str:
        return "1. write tests"

elif mode == "hang":

    @server.tool()
    def wait() -> str:
        """Never answers."""
        while True:
            time.sleep(3600)

elif mode == "crash":

    @server.tool()
    def boom() -> str:
        """Kills this server."""
        os._exit(3)


server.run("stdio")
