"""A local Discord: the REST API and the gateway websocket, on 127.0.0.1.

REST answers with content type exactly ``application/json``, as discord.py expects. The
gateway does the real cycle: HELLO (op 10), IDENTIFY (op 2) answered by a READY dispatch,
heartbeats (op 1) acknowledged (op 11), RESUME (op 6) answered by RESUMED, then
``MESSAGE_CREATE`` dispatches (op 0). It refuses an IDENTIFY without the message-content intent.
Attachments are served from their URL, as Discord's CDN serves them. A button click is an
``INTERACTION_CREATE`` dispatch, answered by the bot on ``POST /interactions/ID/TOKEN/callback``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from aiohttp import WSMsgType, web

TOKEN = "discord-bot-token-0123456789"
BOT_ID = 900000000000000001
BOT = {"id": str(BOT_ID), "username": "clawbot", "discriminator": "0", "avatar": None, "bot": True}
MESSAGE_CONTENT = 1 << 15


@dataclass
class Posted:
    """One message the bot sent."""

    channel_id: int
    message_id: int
    text: str
    reply_to: int | None
    buttons: list[str]


class FakeDiscord:
    """Records what the bot does; the test injects user messages through the gateway."""

    def __init__(self) -> None:
        self.ids = itertools.count(1_000_000_000_000_000_000)
        self.sent: list[Posted] = []
        self.edits: list[tuple[int, int, str]] = []
        self.typing: list[int] = []
        self.history: dict[int, list[dict[str, Any]]] = {}
        self.identifies: list[dict[str, Any]] = []
        self.resumes = 0
        self.files: dict[str, bytes] = {}  # attachment path -> content
        self.downloads: list[str] = []
        self.callbacks: list[tuple[int, str, int]] = []  # interaction id, token, response type
        self.edit_bodies: list[dict[str, Any]] = []
        self.sockets: list[web.WebSocketResponse] = []
        self.lock = threading.Lock()
        self.seq = 0
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None

    async def start(self, port: int = 0) -> None:
        self._loop = asyncio.get_running_loop()
        app = web.Application()
        app.router.add_get("/api/v10/users/@me", self._me)
        app.router.add_get("/api/v10/oauth2/applications/@me", self._app)
        app.router.add_post("/api/v10/channels/{cid}/messages", self._post)
        app.router.add_get("/api/v10/channels/{cid}/messages", self._history)
        app.router.add_patch("/api/v10/channels/{cid}/messages/{mid}", self._patch)
        app.router.add_post("/api/v10/channels/{cid}/typing", self._typing)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/attachments/{path:.+}", self._attachment)
        app.router.add_post("/api/v10/interactions/{iid}/{token}/callback", self._callback)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port or self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        await self.drop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    # -- REST ---------------------------------------------------------------------------------

    def _auth(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bot {TOKEN}"

    async def _me(self, request: web.Request) -> web.Response:
        if not self._auth(request):
            return _json({"message": "401: Unauthorized", "code": 0}, 401)
        return _json(BOT)

    async def _app(self, request: web.Request) -> web.Response:
        return _json(
            {
                "id": str(BOT_ID),
                "name": "clawbot",
                "description": "",
                "icon": None,
                "bot_public": False,
                "bot_require_code_grant": False,
                "verify_key": "k",
                "owner": {**BOT, "bot": False},
                "flags": 0,
            }
        )

    async def _post(self, request: web.Request) -> web.Response:
        cid = int(request.match_info["cid"])
        body = await request.json()
        text = body.get("content") or ""
        if len(text) > 2000:
            return _json({"message": "Invalid Form Body", "code": 50035}, 400)
        ref = (body.get("message_reference") or {}).get("message_id")
        buttons = [
            c["custom_id"] for row in body.get("components") or [] for c in row["components"]
        ]
        mid = next(self.ids)
        with self.lock:
            self.sent.append(Posted(cid, mid, text, int(ref) if ref else None, buttons))
        return _json(message(cid, mid, text, BOT))

    async def _patch(self, request: web.Request) -> web.Response:
        cid, mid = int(request.match_info["cid"]), int(request.match_info["mid"])
        body = await request.json()
        with self.lock:
            self.edits.append((cid, mid, body.get("content") or ""))
            self.edit_bodies.append(body)
        return _json(message(cid, mid, body.get("content") or "", BOT))

    async def _typing(self, request: web.Request) -> web.Response:
        with self.lock:
            self.typing.append(int(request.match_info["cid"]))
        return web.Response(status=204)

    async def _callback(self, request: web.Request) -> web.Response:
        iid, token = int(request.match_info["iid"]), request.match_info["token"]
        body = await request.json()
        with self.lock:
            self.callbacks.append((iid, token, int(body["type"])))
        if request.query.get("with_response") in ("1", "true"):
            interaction = {"id": str(iid), "type": 3, "response_message_loading": False,
                           "response_message_ephemeral": False}  # fmt: skip
            return _json({"interaction": interaction, "resource": {"type": body["type"]}})
        return web.Response(status=204)

    async def _attachment(self, request: web.Request) -> web.Response:
        path = request.match_info["path"]
        with self.lock:
            self.downloads.append(path)
            data = self.files.get(path)
        if data is None:
            return web.Response(status=404)
        return web.Response(body=data, content_type="application/octet-stream")

    async def _history(self, request: web.Request) -> web.Response:
        cid = int(request.match_info["cid"])
        after = int(request.query.get("after", "0"))
        with self.lock:
            found = [m for m in self.history.get(cid, []) if int(m["id"]) > after]
        return _json(sorted(found, key=lambda m: int(m["id"]), reverse=True))  # newest first

    # -- the gateway --------------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 40000}}))
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            payload = json.loads(msg.data)
            op = payload.get("op")
            if op == 1:
                await ws.send_str(json.dumps({"op": 11}))
            elif op == 2:
                self.identifies.append(payload["d"])
                if not payload["d"].get("intents", 0) & MESSAGE_CONTENT:
                    await ws.close(code=4014, message=b"Disallowed intent(s)")
                    break
                self.sockets.append(ws)
                await self._dispatch(ws, "READY", self._ready())
            elif op == 6:
                self.resumes += 1
                self.sockets.append(ws)
                await self._dispatch(ws, "RESUMED", {})
        if ws in self.sockets:
            self.sockets.remove(ws)
        return ws

    def _ready(self) -> dict[str, Any]:
        return {
            "v": 10,
            "user": BOT,
            "guilds": [],
            "session_id": "fake-session",
            "resume_gateway_url": self.gateway_url,
            "application": {"id": str(BOT_ID), "flags": 0},
        }

    async def _dispatch(self, ws: web.WebSocketResponse, kind: str, data: dict[str, Any]) -> None:
        self.seq += 1
        await ws.send_str(json.dumps({"op": 0, "t": kind, "s": self.seq, "d": data}))

    async def _broadcast(self, data: dict[str, Any]) -> None:
        for ws in list(self.sockets):
            await self._dispatch(ws, "MESSAGE_CREATE", data)

    async def drop(self) -> None:
        """Close every gateway connection, as when Discord's gateway restarts."""
        for ws in list(self.sockets):
            await ws.close(code=4000, message=b"reconnect")
        self.sockets.clear()

    # -- what the test does -------------------------------------------------------------------

    def say(
        self,
        channel_id: int,
        user_id: int,
        text: str,
        *,
        guild: bool = False,
        mention: bool = False,
        live: bool = True,
        files: list[tuple[str, bytes]] | None = None,
    ) -> int:
        """A user writes; ``live=False`` only stores it (sent while the bot was away)."""
        mid = next(self.ids)
        user = {"id": str(user_id), "username": f"user{user_id}", "discriminator": "0",
                "avatar": None}  # fmt: skip
        content = f"<@{BOT_ID}> {text}" if mention else text
        data = message(channel_id, mid, content, user)
        for name, body in files or []:
            aid = next(self.ids)
            path = f"{channel_id}/{aid}/{name}"
            with self.lock:
                self.files[path] = body
            url = f"http://127.0.0.1:{self.port}/attachments/{quote(path)}"
            data["attachments"].append(
                {"id": str(aid), "filename": name, "size": len(body), "url": url,
                 "proxy_url": url, "content_type": "application/octet-stream"}
            )  # fmt: skip
        if mention:
            data["mentions"] = [BOT]
        if guild:
            data["guild_id"] = "700000000000000001"
        with self.lock:
            self.history.setdefault(channel_id, []).append(data)
        if live:
            assert self._loop is not None
            asyncio.run_coroutine_threadsafe(self._broadcast(data), self._loop).result(10)
        return mid

    def press(
        self,
        channel_id: int,
        user_id: int,
        custom_id: str,
        message_id: int,
        guild: bool = False,
        omit: tuple[str, ...] = (),
    ) -> int:
        """A user clicks a button under one of the bot's messages; returns the interaction id.

        ``omit`` drops keys from the payload, as when Discord's payloads change under a client.
        """
        iid = next(self.ids)
        user = {"id": str(user_id), "username": f"user{user_id}", "discriminator": "0",
                "avatar": None}  # fmt: skip
        data: dict[str, Any] = {
            "id": str(iid),
            "application_id": str(BOT_ID),
            "type": 3,  # a message component
            "token": f"itoken-{iid}",
            "version": 1,
            "channel_id": str(channel_id),
            "channel": {"id": str(channel_id), "type": 0 if guild else 1},
            "data": {"custom_id": custom_id, "component_type": 2},
            "message": message(channel_id, message_id, "ask", BOT),
            "app_permissions": "0",
            "attachment_size_limit": 8 * 1024 * 1024,  # discord.py requires it
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {},
            "context": 0 if guild else 1,
        }
        if guild:
            data["guild_id"] = "700000000000000001"
            data["channel"].update(name="general", guild_id=data["guild_id"], position=0,
                                   permission_overwrites=[], nsfw=False)  # fmt: skip
            joined = "2024-01-01T00:00:00+00:00"
            data["member"] = {"user": user, "roles": [], "joined_at": joined, "deaf": False,
                              "mute": False, "flags": 0, "permissions": "0"}  # fmt: skip
        else:
            data["user"] = user
        for key in omit:
            data.pop(key, None)

        async def send() -> None:
            for ws in list(self.sockets):
                await self._dispatch(ws, "INTERACTION_CREATE", data)

        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(send(), self._loop).result(10)
        return iid

    def replies(self, channel_id: int) -> list[Posted]:
        with self.lock:
            return [p for p in self.sent if p.channel_id == channel_id]


def message(channel_id: int, mid: int, text: str, author: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(mid),
        "channel_id": str(channel_id),
        "author": author,
        "content": text,
        "timestamp": dt.datetime.now(dt.UTC).isoformat(),
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": False,
        "type": 0,
    }


def _json(data: Any, status: int = 200) -> web.Response:
    # Exactly "application/json": with "; charset=utf-8" discord.py takes the body for text.
    return web.Response(
        body=json.dumps(data).encode(), status=status, headers={"Content-Type": "application/json"}
    )
