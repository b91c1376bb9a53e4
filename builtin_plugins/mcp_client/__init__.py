"""The ``mcp-client`` plugin: external MCP servers' tools as brain tools."""
