"""What every chat connector brings in and what it can do: the gateway's side of a platform."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

ChatKind = Literal["private", "group"]


@dataclass(slots=True)
class IncomingFile:
    """A file sent with a message: its name and size as the platform says, and its handle."""

    name: str
    size: int | None  # bytes; None if the platform does not say before the download
    ref: str  # what the connector downloads it by: Telegram's file_id, Discord's URL


@dataclass(slots=True)
class Incoming:
    """One message from a chat, in the platform's own ids (as strings)."""

    platform: str
    chat_id: str
    chat_kind: ChatKind
    sender_id: str
    sender_name: str
    message_id: str
    text: str | None  # None: no text (a file without a caption, a sticker)
    addressed: bool = True  # private chat, or the bot was mentioned or replied to
    from_button: bool = False  # an inline button press, turned into its command
    files: list[IncomingFile] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Incoming:
        """The message as :func:`dataclasses.asdict` wrote it (the gateway's state file)."""
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["files"] = [IncomingFile(**f) for f in fields.get("files") or []]
        return cls(**fields)

    @property
    def key(self) -> str:
        """Unique per message: what replies are deduplicated by."""
        return f"{self.platform}:{self.chat_id}:{self.message_id}"

    @property
    def chat_key(self) -> str:
        """Unique per chat: one session each."""
        return f"{self.platform}:{self.chat_id}"

    @property
    def user(self) -> str:
        return f"{self.platform}:{self.sender_id}"


@dataclass(slots=True, frozen=True)
class Button:
    """An inline button that sends ``command`` (``/approve 3f9a1c``) as its presser."""

    label: str
    command: str


OnMessage = Callable[[Incoming], Awaitable[None]]


class Connector(Protocol):
    """A chat platform: receive messages, send and edit replies, show typing."""

    name: str
    max_length: int  # the platform's limit on one message

    async def start(self, on_message: OnMessage) -> None:
        """Connect and begin delivering messages to ``on_message``; returns once connected."""
        ...

    async def stop(self) -> None:
        """Stop receiving and disconnect."""
        ...

    async def send(
        self,
        chat_id: str,
        text: str,
        reply_to: str | None = None,
        buttons: list[Button] | None = None,
    ) -> str:
        """Send one message (at most ``max_length``); returns its id."""
        ...

    async def edit(self, chat_id: str, message_id: str, text: str) -> None:
        """Replace a sent message's text (an unchanged text is not an error)."""
        ...

    async def typing(self, chat_id: str) -> None:
        """Show that the bot is working (platforms clear it after a few seconds)."""
        ...

    async def check(self) -> str:
        """Validate the token against the platform without receiving; returns the bot's name."""
        ...

    async def download(self, file: IncomingFile, max_bytes: int) -> bytes:
        """The file's bytes; :class:`FileTooLarge` past ``max_bytes`` (checked before if known)."""
        ...


class FileTooLarge(Exception):
    """A sent file is over the size limit; it is not saved."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"{size} bytes, over the limit of {limit}")
        self.size = size
        self.limit = limit
