"""A long-lived connection to one MCP server, used from the loop's (synchronous) threads.

The official ``mcp`` client is async; one background thread runs its event loop and a single
task holds the ``Client`` open (its cancel scopes must be entered and left by the same task).
Tool calls are submitted to that loop and waited for. A stdio server is started from a
:class:`~sandbox.service.ServiceLaunch`: the same sandbox as a shell command (view, limits,
cgroup, seccomp, network through the proxy, cleared environment), plus only what the server
declares. Its stderr comes through a pipe and reaches the terminal with control characters
shown, never obeyed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from concurrent.futures import Future
from typing import Any

from agent.errors import ToolError, UserError
from agent.terminal_text import terminal_safe
from sandbox.service import ServiceLaunch
from skills.mcp.config import McpServer

_LINE_LIMIT = 4096
INSTALL = "install the MCP client with `pip install 'clawloop[mcp]'`"


class McpConnection:
    """One server: ``open()`` lists its tools, ``call()`` runs one, ``close()`` stops it."""

    def __init__(self, name: str, server: McpServer, launch: ServiceLaunch | None = None) -> None:
        self.name = name
        self.server = server
        self.launch = launch
        self._stderr: StderrRelay | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"clawloop-mcp-{name}", daemon=True
        )
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._held: Future[None] | None = None

    def open(self) -> list[Any]:
        """Connect, and return the server's tool definitions."""
        try:
            import mcp
        except ImportError:
            raise UserError(f"MCP server {self.name!r} is configured but {INSTALL}") from None
        self._thread.start()
        ready: Future[list[Any]] = Future()
        self._held = asyncio.run_coroutine_threadsafe(self._hold(mcp, ready), self._loop)
        try:
            return ready.result(timeout=self.server.timeout_s)
        except TimeoutError:
            self.close()
            raise UserError(
                f"MCP server {self.name!r} did not answer within {self.server.timeout_s:g} s"
            ) from None
        except Exception as exc:
            self.close()
            raise UserError(
                f"MCP server {self.name!r} could not be started or reached: {_why(exc)}; "
                "check its command or url in the config"
            ) from None

    async def _hold(self, mcp: Any, ready: Future[list[Any]]) -> None:
        self._stop = asyncio.Event()
        if self.server.url is not None:
            target: Any = self.server.url
        else:
            from mcp.client.stdio import stdio_client

            assert self.launch is not None  # a stdio server always has its command line
            argv = self.launch.argv
            params = mcp.StdioServerParameters(command=argv[0], args=argv[1:], env=self.launch.env)
            self._stderr = StderrRelay(self.name)
            target = stdio_client(params, errlog=self._stderr.writer)
        try:
            async with mcp.Client(target, read_timeout_seconds=self.server.timeout_s) as client:
                self._client = client
                listed = await client.list_tools()
                ready.set_result(list(listed.tools))
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._client = None

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Run one tool; a dead connection or a protocol error is a ToolError for the model."""
        if self._client is None:
            raise ToolError(f"the MCP server {self.name!r} is not connected; tell the user")
        future = asyncio.run_coroutine_threadsafe(
            self._client.call_tool(tool, arguments), self._loop
        )
        try:
            return future.result(timeout=self.server.timeout_s)
        except TimeoutError:
            future.cancel()
            raise ToolError(
                f"the MCP server {self.name!r} did not answer {tool} within "
                f"{self.server.timeout_s:g} s"
            ) from None
        except Exception as exc:
            raise ToolError(f"the MCP server {self.name!r} failed on {tool}: {_why(exc)}") from None

    def close(self) -> None:
        """Leave the client (stopping a stdio server) and the background loop."""
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._held is not None:
            with contextlib.suppress(Exception):  # closing: the server may already be gone
                self._held.result(timeout=10)
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        if self.launch is not None:
            self.launch.close()


class StderrRelay:
    """A pipe for a server's stderr; each line reaches clawloop's stderr with control
    characters shown (``^[``), prefixed with the server's name."""

    def __init__(self, name: str) -> None:
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w")
        self._reader = os.fdopen(read_fd, "rb")
        self._thread = threading.Thread(
            target=self._pump, args=(name,), name=f"clawloop-mcp-stderr-{name}", daemon=True
        )
        self._thread.start()

    def _pump(self, name: str) -> None:
        pending = b""
        with contextlib.suppress(OSError, ValueError):
            while chunk := self._reader.read1(4096):
                *lines, pending = (pending + chunk).split(b"\n")
                if len(pending) > _LINE_LIMIT:  # a line without end is shown in pieces
                    lines, pending = [*lines, pending], b""
                for line in lines:
                    self._show(name, line)
        if pending:
            self._show(name, pending)

    @staticmethod
    def _show(name: str, line: bytes) -> None:
        text = line.decode("utf-8", errors="replace")
        sys.stderr.write(terminal_safe(f"[{name}] {text}") + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        """Close our end; the relay ends once the server's copy is closed too."""
        with contextlib.suppress(OSError):
            self.writer.close()
        self._thread.join(timeout=2)


def _why(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _why(exc.exceptions[0])
    return str(exc) or type(exc).__name__
