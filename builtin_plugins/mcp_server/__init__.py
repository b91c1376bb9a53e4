"""The ``mcp`` plugin: Elowen's own MCP server at ``/mcp`` (streamable HTTP)."""
