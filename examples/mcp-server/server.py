"""A small MCP server for clawloop: arithmetic and a note store, over stdio or HTTP.

python server.py                 # stdio (what clawloop starts for `command = [...]`)
python server.py --http 8765     # streamable HTTP on http://127.0.0.1:8765/mcp
"""

from __future__ import annotations

import os
import sys

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("notes")
NOTES: list[str] = []


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
def remember(text: str) -> str:
    """Keep a note for the rest of this server's life."""
    NOTES.append(text)
    return f"noted ({len(NOTES)} notes)"


@server.tool()
def environment() -> str:
    """The names of the environment variables this server can see."""
    return ", ".join(sorted(os.environ))


@server.tool()
def fail(reason: str) -> str:
    """Always fails, with the given reason (the client gets an error result)."""
    raise ToolError(reason)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
