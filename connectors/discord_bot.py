"""Discord, through discord.py: the gateway websocket, with the message-content intent.

discord.py reconnects (and resumes) with backoff by itself after network errors; anything else
ends its ``connect()`` (a dispatch it cannot parse, say), so the connector connects again rather
than go deaf. Each channel's last handled message id is saved; on start, what a channel got
while the gateway was down is fetched and handled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from agent.errors import UserError
from agent.terminal_text import escape_controls
from connectors.base import Button, FileTooLarge, Incoming, IncomingFile, OnMessage
from connectors.logs import log
from connectors.state import GatewayState

MAX_LENGTH = 2000
DEFAULT_API_BASE = "https://discord.com/api/v10"
DEFAULT_GATEWAY_URL = "wss://gateway.discord.gg/"
READY_TIMEOUT_S = 30.0
MAX_RECONNECT_WAIT_S = 60.0


def _discord() -> Any:
    try:
        import discord
    except ImportError:
        raise UserError(
            "the Discord connector needs discord.py: pip install 'clawloop[gateway]'"
        ) from None
    return discord


class DiscordConnector:
    """A Discord bot (its token, its REST and gateway URLs) delivering messages to the gateway."""

    name = "discord"
    max_length = MAX_LENGTH

    def __init__(
        self,
        token: str,
        state: GatewayState,
        api_base: str = DEFAULT_API_BASE,
        gateway_url: str = DEFAULT_GATEWAY_URL,
        guild_ready_timeout: float = 2.0,
    ) -> None:
        import yarl

        discord = _discord()
        self._dc = discord
        # discord.py reads both from class attributes: one Discord connector per process.
        discord.http.Route.BASE = api_base.rstrip("/")
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)
        self.token = token
        self.state = state
        self._guild_ready_timeout = guild_ready_timeout
        self.client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._connection: asyncio.Task[None] | None = None
        self._on_message: OnMessage | None = None
        self._stopping = False

    def _make_client(self) -> Any:
        discord = self._dc
        intents = discord.Intents.default()
        intents.message_content = True
        client = discord.Client(intents=intents, guild_ready_timeout=self._guild_ready_timeout)
        ready = asyncio.Event()

        @client.event
        async def on_ready() -> None:
            ready.set()

        @client.event
        async def on_message(message: Any) -> None:
            await self._deliver(message)

        @client.event
        async def on_interaction(interaction: Any) -> None:
            await self._button(interaction)

        client._clawloop_ready = ready
        return client

    async def check(self) -> str:
        """Log in over REST (``/users/@me``); returns the bot's name."""
        discord = self._dc
        if self.client is None:
            self.client = self._make_client()
        try:
            await self.client.login(self.token)
        except discord.LoginFailure:
            raise UserError(
                "Discord refused the bot token: set [connectors.discord] token "
                "or CLAWLOOP_DISCORD_TOKEN to the token of your application's bot"
            ) from None
        except (discord.HTTPException, OSError) as exc:
            raise UserError(f"cannot reach Discord's API: {exc}") from None
        return str(self.client.user)

    async def start(self, on_message: OnMessage) -> None:
        self._on_message = on_message
        await self.check()
        client = self.client
        first = asyncio.create_task(client.connect(reconnect=True), name="discord-gateway")
        ready = asyncio.create_task(client._clawloop_ready.wait())
        done, _ = await asyncio.wait(
            {first, ready}, timeout=READY_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
        )
        if first in done:
            ready.cancel()
            exc = first.exception()
            raise UserError(f"the Discord gateway connection failed: {exc!r}")
        if ready not in done:
            ready.cancel()
            first.cancel()
            raise UserError(f"Discord's gateway did not get ready within {READY_TIMEOUT_S:g} s")
        self._connection = first
        self._task = asyncio.create_task(self._stay_connected(), name="discord-watch")
        await self._catch_up()

    async def stop(self) -> None:
        self._stopping = True
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.close()
        for task in (self._task, self._connection):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _stay_connected(self) -> None:
        """Connect again whenever ``connect()`` ends with an error it did not retry itself."""
        wait = 1.0
        while self._connection is not None:
            try:
                await self._connection
                return  # closed by stop()
            except Exception as exc:
                if self._stopping:
                    return
                log(logging.ERROR, "discord_gateway_failed", error=repr(exc), retry_in=wait)
            if self.client.ws is not None:
                with contextlib.suppress(Exception):
                    await self.client.ws.close(code=1000)
            await asyncio.sleep(wait)
            wait = min(wait * 2, MAX_RECONNECT_WAIT_S)
            self._connection = asyncio.create_task(
                self.client.connect(reconnect=True), name="discord-gateway"
            )

    async def _catch_up(self) -> None:
        """Handle what arrived in known channels while the gateway was not running."""
        cursors = self.state.cursor("discord") or {}
        for channel_id, (last_id, kind) in dict(cursors).items():
            channel = self.client.get_partial_messageable(int(channel_id))
            try:
                missed = [
                    m
                    async for m in channel.history(
                        limit=100, after=self._dc.Object(int(last_id)), oldest_first=True
                    )
                ]
            except Exception as exc:
                log(logging.WARNING, "discord_catch_up_failed", channel=channel_id, error=str(exc))
                continue
            for message in missed:
                await self._deliver(message, kind)

    async def _deliver(self, message: Any, kind: str | None = None) -> None:
        if self._on_message is None or message.author.bot or message.author == self.client.user:
            return
        incoming = self._incoming(message)
        if kind is not None:  # fetched by id alone: the channel's kind comes from the cursor
            incoming.chat_kind = "private" if kind == "private" else "group"
            incoming.addressed = incoming.addressed or kind == "private"
        try:
            await self._on_message(incoming)
        except Exception as exc:  # one bad message must not stop the bot
            log(logging.ERROR, "discord_message_failed", error=repr(exc))
        cursors = dict(self.state.cursor("discord") or {})
        last = cursors.get(incoming.chat_id)
        if last is None or int(last[0]) < message.id:
            cursors[incoming.chat_id] = [str(message.id), incoming.chat_kind]
            self.state.set_cursor("discord", cursors)

    def _incoming(self, message: Any) -> Incoming:
        me = self.client.user
        private = message.guild is None and getattr(message.channel, "guild_id", None) is None
        mentioned = me is not None and me.id in message.raw_mentions
        ref = message.reference
        resolved = getattr(ref, "resolved", None) if ref is not None else None
        replied = me is not None and getattr(getattr(resolved, "author", None), "id", None) == me.id
        text: str | None = message.content
        if mentioned and text is not None:
            text = text.replace(f"<@{me.id}>", "").replace(f"<@!{me.id}>", "").strip()
        files = [IncomingFile(a.filename, a.size, a.url) for a in message.attachments]
        if files and not text:
            text = None
        return Incoming(
            "discord",
            str(message.channel.id),
            "private" if private else "group",
            str(message.author.id),
            message.author.display_name or message.author.name,
            str(message.id),
            text,
            addressed=private or mentioned or replied,
            files=files,
        )

    async def _button(self, interaction: Any) -> None:
        data = interaction.data or {}
        command = str(data.get("custom_id", ""))
        if not command.startswith("/") or self._on_message is None:
            return
        with contextlib.suppress(Exception):
            await interaction.response.defer()
        channel_id = interaction.channel_id
        await self._on_message(
            Incoming(
                "discord",
                str(channel_id),
                "private" if interaction.guild_id is None else "group",
                str(interaction.user.id),
                interaction.user.display_name,
                f"ia{interaction.id}",
                command,
                addressed=True,
                from_button=True,
            )
        )

    async def send(
        self,
        chat_id: str,
        text: str,
        reply_to: str | None = None,
        buttons: list[Button] | None = None,
    ) -> str:
        discord = self._dc
        channel = self.client.get_partial_messageable(int(chat_id))
        kwargs: dict[str, Any] = {}
        if reply_to is not None and reply_to.isdigit():
            kwargs["reference"] = discord.MessageReference(
                message_id=int(reply_to), channel_id=int(chat_id), fail_if_not_exists=False
            )
        if buttons:
            view = discord.ui.View(timeout=None)
            for b in buttons:
                view.add_item(discord.ui.Button(label=b.label, custom_id=b.command[:100]))
            kwargs["view"] = view
        sent = await channel.send(escape_controls(text), **kwargs)
        return str(sent.id)

    async def edit(self, chat_id: str, message_id: str, text: str) -> None:
        """Replace the text and drop any buttons (an answered ask keeps none to click)."""
        channel = self.client.get_partial_messageable(int(chat_id))
        await channel.get_partial_message(int(message_id)).edit(
            content=escape_controls(text), view=None
        )

    async def typing(self, chat_id: str) -> None:
        await self.client.get_partial_messageable(int(chat_id)).typing()

    async def download(self, file: IncomingFile, max_bytes: int) -> bytes:
        """The attachment from its URL (Discord's CDN), through the client's own session."""
        if file.size is not None and file.size > max_bytes:
            raise FileTooLarge(file.size, max_bytes)
        data: bytes = await self.client.http.get_from_cdn(file.ref)
        if len(data) > max_bytes:
            raise FileTooLarge(len(data), max_bytes)
        return data
