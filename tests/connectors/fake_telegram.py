"""A local Telegram Bot API server: the real HTTP wire format, on 127.0.0.1.

Methods are ``POST /bot<TOKEN>/<method>`` with form-encoded bodies whose non-string values are
JSON; answers are ``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code", "description"}``.
``getUpdates`` long-polls and honours ``offset`` exactly as Telegram does: updates below the
offset are confirmed and dropped. Files are ``getFile`` then ``GET /file/bot<TOKEN>/<file_path>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

TOKEN = "123456:TEST-telegram-token-abcdef"
BOT = {"id": 999, "is_bot": True, "first_name": "Claw", "username": "clawbot"}


@dataclass
class Sent:
    """One message the bot sent."""

    chat_id: int
    message_id: int
    text: str
    reply_to: int | None
    buttons: list[str] = field(default_factory=list)


class FakeTelegram:
    """Holds updates to deliver and records what the bot does."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.updates: list[dict[str, Any]] = []
        self.next_update = 1
        self.next_message = 1000
        self.sent: list[Sent] = []
        self.edits: list[tuple[int, int, str]] = []
        self.texts: dict[tuple[int, int], str] = {}
        self.actions: list[tuple[int, str]] = []
        self.offsets: list[int] = []
        self.not_modified = 0
        self.fail_next: list[int] = []  # HTTP statuses to answer the next calls with
        self.files: dict[str, tuple[str, bytes]] = {}  # file_id -> (file_path, content)
        self.downloads: list[str] = []  # file paths fetched from the file endpoint
        self.lock = threading.Lock()
        self._runner: web.AppRunner | None = None
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.port = 0

    # -- the server -------------------------------------------------------------------------

    async def start(self, port: int = 0) -> str:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_post("/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._file)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port or self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self.base_url

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    async def stop(self) -> None:
        if self._wake is not None:
            self._wake.set()  # release parked polls
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        with self.lock:
            status = self.fail_next.pop(0) if self.fail_next else None
        if status is not None:
            return _error(status, "Bad Gateway" if status >= 500 else "Error")
        form = await request.post()
        params = {k: _decode(v) for k, v in form.items() if isinstance(v, str)}
        method = request.match_info["method"]
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return _error(404, "Not Found")
        result = await handler(params)
        if isinstance(result, web.Response):
            return result
        return web.json_response({"ok": True, "result": result})

    async def _file(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        path = request.match_info["path"]
        with self.lock:
            found = [data for p, data in self.files.values() if p == path]
            self.downloads.append(path)
        if not found:
            return _error(404, "Not Found")
        return web.Response(body=found[0], content_type="application/octet-stream")

    async def _m_getFile(self, p: dict[str, Any]) -> Any:
        file_id = str(p["file_id"])
        with self.lock:
            found = self.files.get(file_id)
        if found is None:
            return _error(400, "Bad Request: invalid file_id")
        path, data = found
        return {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_size": len(data),
            "file_path": path,
        }

    async def _m_getMe(self, p: dict[str, Any]) -> Any:
        return BOT

    async def _m_deleteWebhook(self, p: dict[str, Any]) -> Any:
        return True

    async def _m_getUpdates(self, p: dict[str, Any]) -> Any:
        offset = int(p.get("offset") or 0)
        timeout = float(p.get("timeout") or 0)
        with self.lock:
            self.offsets.append(offset)
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                if offset:
                    self.updates = [u for u in self.updates if u["update_id"] >= offset]
                ready = list(self.updates)
            if ready or time.monotonic() >= deadline or self._runner is None:
                return ready
            assert self._wake is not None
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), deadline - time.monotonic())

    async def _m_sendMessage(self, p: dict[str, Any]) -> Any:
        chat_id = int(p["chat_id"])
        text = str(p["text"])
        if len(text) > 4096:
            return _error(400, "Bad Request: message is too long")
        reply = p.get("reply_parameters")
        reply_to = int(reply["message_id"]) if isinstance(reply, dict) else None
        markup = p.get("reply_markup") or {}
        buttons = [b["callback_data"] for row in markup.get("inline_keyboard", []) for b in row]
        with self.lock:
            self.next_message += 1
            mid = self.next_message
            self.sent.append(Sent(chat_id, mid, text, reply_to, buttons))
            self.texts[(chat_id, mid)] = text
        return _message(chat_id, mid, text, BOT)

    async def _m_editMessageText(self, p: dict[str, Any]) -> Any:
        chat_id, mid, text = int(p["chat_id"]), int(p["message_id"]), str(p["text"])
        with self.lock:
            if (chat_id, mid) not in self.texts:
                return _error(400, "Bad Request: message to edit not found")
            if self.texts[(chat_id, mid)] == text:
                self.not_modified += 1
                return _error(
                    400,
                    "Bad Request: message is not modified: specified new message content and "
                    "reply markup are exactly the same as a current content and reply markup "
                    "of the message",
                )
            self.texts[(chat_id, mid)] = text
            self.edits.append((chat_id, mid, text))
        return _message(chat_id, mid, text, BOT)

    async def _m_sendChatAction(self, p: dict[str, Any]) -> Any:
        with self.lock:
            self.actions.append((int(p["chat_id"]), str(p["action"])))
        return True

    async def _m_answerCallbackQuery(self, p: dict[str, Any]) -> Any:
        return True

    # -- what the test does -----------------------------------------------------------------

    def _push(self, update: dict[str, Any]) -> int:
        with self.lock:
            update["update_id"] = self.next_update
            self.next_update += 1
            self.updates.append(update)
        if self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)
        return int(update["update_id"])

    def say(
        self,
        chat_id: int,
        user_id: int,
        text: str | None,
        *,
        group: bool = False,
        reply_to_bot: bool = False,
        photo: bool = False,
        document: tuple[str, bytes] | None = None,
        declared_size: int | None = None,
    ) -> int:
        """A user writes (``text`` is the caption if a document is sent); returns its id."""
        with self.lock:
            self.next_message += 1
            mid = self.next_message
        user = {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"}
        message = _message(chat_id, mid, text, user, "group" if group else "private")
        if document is not None:
            name, data = document
            file_id = f"doc{mid}"
            with self.lock:
                self.files[file_id] = (f"documents/file_{mid}.bin", data)
            message["document"] = {
                "file_id": file_id,
                "file_unique_id": f"u{file_id}",
                "file_name": name,
                "file_size": len(data) if declared_size is None else declared_size,
            }
            if text is not None:
                message["caption"] = message.pop("text")
        if text is not None and text.startswith("/"):
            length = len(text.split(" ", 1)[0])
            message["entities"] = [{"type": "bot_command", "offset": 0, "length": length}]
        if text is not None and "@clawbot" in text:
            at = text.index("@clawbot")
            message.setdefault("entities", []).append(
                {"type": "mention", "offset": at, "length": len("@clawbot")}
            )
        if reply_to_bot:
            message["reply_to_message"] = _message(chat_id, mid - 1, "earlier", BOT, "group")
        if photo:
            message["photo"] = [
                {"file_id": "f1", "file_unique_id": "u1", "width": 10, "height": 10}
            ]
        self._push({"message": message})
        return mid

    def press(self, chat_id: int, user_id: int, data: str, message_id: int) -> None:
        """A user presses an inline button under one of the bot's messages."""
        user = {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"}
        self._push(
            {
                "callback_query": {
                    "id": f"q{time.monotonic_ns()}",
                    "from": user,
                    "chat_instance": "ci",
                    "data": data,
                    "message": _message(chat_id, message_id, "ask", BOT),
                }
            }
        )

    def replies(self, chat_id: int) -> list[Sent]:
        with self.lock:
            return [s for s in self.sent if s.chat_id == chat_id]


def _message(
    chat_id: int, mid: int, text: str | None, sender: dict[str, Any], kind: str = "private"
) -> dict[str, Any]:
    chat: dict[str, Any] = {"id": chat_id, "type": kind}
    if kind == "private":
        chat["first_name"] = "someone"
    else:
        chat["title"] = "a group"
    message: dict[str, Any] = {
        "message_id": mid,
        "date": int(time.time()),
        "chat": chat,
        "from": sender,
    }
    if text is not None:
        message["text"] = text
    return message


def _decode(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def _error(status: int, description: str) -> web.Response:
    return web.json_response(
        {"ok": False, "error_code": status, "description": description}, status=status
    )
