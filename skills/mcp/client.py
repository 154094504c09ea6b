"""A long-lived connection to one MCP server, used from the loop's (synchronous) threads.

The official ``mcp`` client is async; one background thread runs its event loop and a single
task holds the ``Client`` open (its cancel scopes must be entered and left by the same task).
Tool calls are submitted to that loop and waited for. A stdio server is started under
bubblewrap (read-only system, private /tmp and /home, no network unless declared, as the
unprivileged sandbox user when clawloop runs as root), with a cleared environment holding only
the variables it declares.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from agent.errors import ToolError, UserError
from sandbox.bwrap import SAFE_PATH, bwrap_path
from sandbox.limits import setpriv_argv
from sandbox.settings import SandboxSettings
from skills.mcp.config import McpServer

INSTALL = "install the MCP client with `pip install 'clawloop[mcp]'`"


def sandboxed_argv(
    server: McpServer, settings: SandboxSettings, environ: Mapping[str, str]
) -> list[str]:
    """The stdio server's command line: under bubblewrap unless the sandbox is off.

    Either way its environment holds only PATH, HOME, LANG and the variables it declares.
    """
    assert server.command is not None  # checked by McpServer's validator
    env = {"PATH": SAFE_PATH, "HOME": "/tmp", "LANG": "C.UTF-8"}
    env.update({name: environ[name] for name in server.env if name in environ})
    if settings.backend == "off" or not server.sandbox:
        return ["env", "-i", *(f"{k}={v}" for k, v in env.items()), *server.command]
    bwrap = [bwrap_path(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for folder in ("/tmp", "/home", "/root", "/run"):
        bwrap += ["--tmpfs", folder]
    rest = ["--ro-bind", "/proc/sys", "/proc/sys", "--unshare-all"]
    if server.network:
        rest.append("--share-net")
    rest += ["--unshare-user", "--disable-userns", "--die-with-parent", "--clearenv"]
    for key, value in env.items():
        rest += ["--setenv", key, value]
    prefix: list[str] = []
    if os.geteuid() == 0:
        rest += ["--cap-drop", "ALL"]
        prefix = setpriv_argv(settings.sandbox_uid)
    binds: list[str] = []
    for path in server.read:  # folders hidden by the tmpfs mounts above (/tmp, /home, ...)
        real = str(Path(path).expanduser().resolve())
        binds += ["--ro-bind", real, real]
    return [*prefix, *bwrap, *binds, *rest, "--", *server.command]


class McpConnection:
    """One server: ``open()`` lists its tools, ``call()`` runs one, ``close()`` stops it."""

    def __init__(self, name: str, server: McpServer, argv: list[str] | None = None) -> None:
        self.name = name
        self.server = server
        self.argv = argv
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
            assert self.argv is not None  # a stdio server always has its command line
            target = mcp.StdioServerParameters(command=self.argv[0], args=self.argv[1:], env={})
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


def _why(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _why(exc.exceptions[0])
    return str(exc) or type(exc).__name__
