"""Tools from MCP servers (stdio and streamable HTTP), as skills."""
