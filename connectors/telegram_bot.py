"""Telegram, through python-telegram-bot: long polling with a persisted offset.

The offset moves past an update only once the gateway has recorded it, and is saved, so a
restart neither drops nor repeats updates. Network errors and 5xx answers back off and retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agent.errors import UserError
from agent.terminal_text import escape_controls
from connectors.base import Button, FileTooLarge, Incoming, IncomingFile, OnMessage
from connectors.logs import log
from connectors.state import GatewayState

MAX_LENGTH = 4096
DEFAULT_BASE_URL = "https://api.telegram.org/bot"
T = TypeVar("T")
# What a file is called when Telegram gives no name: the kind of message and a usual suffix.
_UNNAMED = {
    "document": "",
    "photo": ".jpg",
    "audio": ".mp3",
    "video": ".mp4",
    "voice": ".ogg",
    "video_note": ".mp4",
    "animation": ".mp4",
}


def _telegram() -> Any:
    try:
        import telegram
        import telegram.error
        import telegram.request
    except ImportError:
        raise UserError(
            "the Telegram connector needs python-telegram-bot: pip install 'clawloop[gateway]'"
        ) from None
    return telegram


class TelegramConnector:
    """A Telegram bot (its token, its API base URL) delivering messages to the gateway."""

    name = "telegram"
    max_length = MAX_LENGTH

    def __init__(
        self,
        token: str,
        state: GatewayState,
        base_url: str = DEFAULT_BASE_URL,
        poll_timeout: int = 30,
        max_backoff_s: float = 30.0,
    ) -> None:
        tg = _telegram()
        self._tg = tg
        file_url = base_url.replace("/bot", "/file/bot") if "/bot" in base_url else base_url
        self.bot = tg.Bot(
            token,
            base_url=base_url,
            base_file_url=file_url,
            request=tg.request.HTTPXRequest(connection_pool_size=64, pool_timeout=30.0),
            get_updates_request=tg.request.HTTPXRequest(read_timeout=poll_timeout + 10.0),
        )
        self.state = state
        self.poll_timeout = poll_timeout
        self.max_backoff_s = max_backoff_s
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.username = ""
        self.bot_id = 0

    async def check(self) -> str:
        """Validate the token (``getMe``); returns ``@username``."""
        err = self._tg.error
        try:
            await self.bot.initialize()
        except err.InvalidToken:
            raise UserError(
                "Telegram refused the bot token: set [connectors.telegram] token "
                "or CLAWLOOP_TELEGRAM_TOKEN to the token @BotFather gave you"
            ) from None
        except err.NetworkError as exc:
            raise UserError(f"cannot reach Telegram's API: {exc.message}") from None
        self.username = self.bot.username or ""
        self.bot_id = self.bot.id
        return f"@{self.username}"

    async def start(self, on_message: OnMessage) -> None:
        await self.check()
        self._task = asyncio.create_task(self._poll(on_message), name="telegram-poll")

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        with contextlib.suppress(Exception):
            await self.bot.shutdown()

    async def _poll(self, on_message: OnMessage) -> None:
        err = self._tg.error
        backoff = 1.0
        while not self._stopping:
            offset = self.state.cursor("telegram")
            try:
                updates = await self.bot.get_updates(
                    offset=offset,
                    timeout=self.poll_timeout,
                    allowed_updates=["message", "callback_query"],
                )
                backoff = 1.0
            except err.TimedOut:
                continue
            except err.RetryAfter as exc:
                await asyncio.sleep(_seconds(exc.retry_after))
                continue
            except (err.NetworkError, err.Conflict, err.InvalidToken) as exc:
                log(logging.WARNING, "telegram_poll_failed", error=str(exc), retry_in=backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)
                continue
            for update in updates:
                try:
                    message = await self._incoming(update)
                    if message is not None:
                        await on_message(message)
                except Exception as exc:  # one bad update must not stop the bot
                    log(logging.ERROR, "telegram_update_failed", error=repr(exc))
                self.state.set_cursor("telegram", update.update_id + 1)

    async def _incoming(self, update: Any) -> Incoming | None:
        query = update.callback_query
        if query is not None:
            with contextlib.suppress(Exception):
                await self.bot.answer_callback_query(query.id)
            if query.message is None or not query.data:
                return None
            chat = query.message.chat
            return Incoming(
                "telegram",
                str(chat.id),
                "private" if chat.type == "private" else "group",
                str(query.from_user.id),
                query.from_user.full_name or "",
                f"cb{query.id}",
                str(query.data),
                addressed=True,
                from_button=True,
            )
        msg = update.message
        if msg is None or msg.from_user is None:
            return None
        private = msg.chat.type == "private"
        text = msg.text if msg.text is not None else msg.caption
        mention = f"@{self.username}".lower() if self.username else ""
        replied = msg.reply_to_message is not None and (
            msg.reply_to_message.from_user is not None
            and msg.reply_to_message.from_user.id == self.bot_id
        )
        mentioned = bool(mention) and text is not None and mention in text.lower()
        if text is not None and mentioned:
            text = _strip_mention(text, mention)
        files = _files(msg)
        return Incoming(
            "telegram",
            str(msg.chat.id),
            "private" if private else "group",
            str(msg.from_user.id),
            msg.from_user.full_name or "",
            str(msg.message_id),
            text,
            addressed=private or mentioned or replied,
            files=files,
        )

    async def send(
        self,
        chat_id: str,
        text: str,
        reply_to: str | None = None,
        buttons: list[Button] | None = None,
    ) -> str:
        tg = self._tg
        kwargs: dict[str, Any] = {}
        if reply_to is not None and reply_to.isdigit():
            kwargs["reply_parameters"] = tg.ReplyParameters(
                int(reply_to), allow_sending_without_reply=True
            )
        if buttons:
            kwargs["reply_markup"] = tg.InlineKeyboardMarkup(
                [[tg.InlineKeyboardButton(b.label, callback_data=b.command) for b in buttons]]
            )
        sent = await self._retry(
            lambda: self.bot.send_message(int(chat_id), escape_controls(text), **kwargs)
        )
        return str(sent.message_id)

    async def edit(self, chat_id: str, message_id: str, text: str) -> None:
        err = self._tg.error
        try:
            await self._retry(
                lambda: self.bot.edit_message_text(
                    escape_controls(text), chat_id=int(chat_id), message_id=int(message_id)
                )
            )
        except err.BadRequest as exc:
            if "not modified" not in exc.message.lower():
                raise

    async def typing(self, chat_id: str) -> None:
        await self.bot.send_chat_action(int(chat_id), "typing")

    async def download(self, file: IncomingFile, max_bytes: int) -> bytes:
        """``getFile``, then the file from the Bot API's file URL (as Telegram serves it)."""
        if file.size is not None and file.size > max_bytes:
            raise FileTooLarge(file.size, max_bytes)
        found = await self._retry(lambda: self.bot.get_file(file.ref))
        if found.file_size is not None and found.file_size > max_bytes:
            raise FileTooLarge(found.file_size, max_bytes)
        data = bytes(await found.download_as_bytearray())
        if len(data) > max_bytes:
            raise FileTooLarge(len(data), max_bytes)
        return data

    async def _retry(self, call: Callable[[], Awaitable[T]], attempts: int = 4) -> T:
        """Retry flood limits and network errors; a bad request is the caller's to handle."""
        err = self._tg.error
        delay = 0.5
        for attempt in range(attempts):
            try:
                return await call()
            except err.RetryAfter as exc:
                await asyncio.sleep(_seconds(exc.retry_after))
            except (err.BadRequest, err.Forbidden, err.InvalidToken):
                raise
            except err.NetworkError:
                if attempt == attempts - 1:
                    raise
                await asyncio.sleep(delay)
                delay *= 2
        return await call()


def _files(msg: Any) -> list[IncomingFile]:
    """The files of a message (a photo in its largest size); stickers are not files here."""
    found: list[IncomingFile] = []
    seen: set[str] = set()
    for kind, suffix in _UNNAMED.items():
        item = getattr(msg, kind, None)
        if isinstance(item, tuple | list):  # a photo comes in several sizes, largest last
            item = item[-1] if item else None
        # An animation also comes as a document: the same file, saved once.
        if item is None or item.file_unique_id in seen:
            continue
        seen.add(item.file_unique_id)
        name = getattr(item, "file_name", None) or f"{kind}-{item.file_unique_id}{suffix}"
        found.append(IncomingFile(name, item.file_size, item.file_id))
    return found


def _seconds(value: Any) -> float:
    return float(value.total_seconds()) if hasattr(value, "total_seconds") else float(value)


def _strip_mention(text: str, mention: str) -> str:
    at = text.lower().find(mention)
    return (text[:at] + text[at + len(mention) :]).strip() if at >= 0 else text
