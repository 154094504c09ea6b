"""The web page of `agent web`, served by `agent gateway` in its own process and event loop.

The page keeps its own per-tab sessions (as under `agent web`) but runs them on the gateway's
loop, skills, sandbox and approval machinery, and shares its list of "always" rules both ways.
It is not a :class:`~connectors.base.Connector`: it receives HTTP requests, not chat messages,
and its tabs need no pairing, rate limit or chat commands (the page is the owner's).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator
from typing import TYPE_CHECKING

from agent.errors import UserError
from agent.loop import AgentLoop
from cli.config import Settings
from cli.web_cmd import WEB_INSTALL_HINT, page_app

if TYPE_CHECKING:
    import uvicorn


def web_token(settings: Settings) -> str | None:
    """The page's token, from the variable ``[connectors.web] token_env`` names (if any)."""
    name = settings.connectors.web.token_env
    if not name:
        return None
    token = os.environ.get(name, "")
    if not token:
        raise UserError(
            f"[connectors.web] token_env names {name}, which is not set: export {name} with a "
            "long random value"
        )
    return token


def web_server(settings: Settings, loop: AgentLoop, always: list[str]) -> uvicorn.Server | None:
    """A uvicorn server for the page, or None when ``[connectors.web]`` is not enabled.

    Same rules as `agent web`: loopback by default, any other host only with a token.
    """
    table = settings.connectors.web
    if not table.enabled:
        return None
    try:
        import uvicorn
    except ImportError:
        raise UserError(f"[connectors.web] needs uvicorn: run {WEB_INSTALL_HINT}") from None
    app = page_app(settings, loop, table.host, table.port, web_token(settings), always)

    class Server(uvicorn.Server):
        """Leaves SIGINT and SIGTERM to the gateway, which stops the page with the rest."""

        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None, None, None]:
            yield

    config = uvicorn.Config(
        app, host=table.host, port=table.port, log_level="warning", access_log=False
    )
    return Server(config)
