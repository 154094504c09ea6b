"""The built-in connectors, registered through the same hook a third-party connector uses.

A factory takes the connector's settings table, its token and the gateway's state, and returns a
:class:`~connectors.base.Connector`. Chat libraries are imported only when one is built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.plugins import hookimpl
from connectors.base import Connector
from connectors.state import GatewayState


def make_telegram(settings: Any, token: str, state: GatewayState) -> Connector:
    """python-telegram-bot, long polling."""
    from connectors.telegram_bot import TelegramConnector

    return TelegramConnector(token, state, settings.base_url, settings.poll_timeout)


def make_discord(settings: Any, token: str, state: GatewayState) -> Connector:
    """discord.py, the gateway websocket with the message-content intent."""
    from connectors.discord_bot import DiscordConnector

    return DiscordConnector(token, state, settings.api_base, settings.gateway_url)


@hookimpl
def register_connectors(register: Callable[[str, Callable[..., Any]], None]) -> None:
    register("telegram", make_telegram)
    register("discord", make_discord)
