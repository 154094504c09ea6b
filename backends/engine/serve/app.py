"""The Starlette application: routes, bearer-key check, errors in OpenAI's shape, SSE.

One engine serves every request: they all batch in its single step loop. A client that goes
away mid-request (streamed or not) has its request aborted, which frees its blocks. A client's
mistake is a 4xx; anything unexpected is logged and answered with a 500 in the same shape,
and the engine carries on either way.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from backends.engine.backend import LoadedEngine
from backends.engine.serve import bridge
from backends.engine.serve.bridge import EngineFailed
from backends.engine.serve.metrics import ServerMetrics
from backends.engine.serve.protocol import (
    APIError,
    ChatCompletionRequest,
    CompletionRequest,
    validation_error,
)
from backends.engine.serve.requests import DraftDefaults, Prepared, RequestBuilder
from backends.engine.serve.responses import ChatResponder, CompletionResponder

log = logging.getLogger("clawloop.serve")
Handler = Callable[[Request], Awaitable[Response]]


class Server:
    """The state every route shares: the loaded engine, its model's names, metrics, the key."""

    def __init__(
        self,
        loaded: LoadedEngine,
        model_id: str,
        api_key: str | None = None,
        drafts: DraftDefaults | None = None,
    ) -> None:
        self.loaded = loaded
        self.model_id = model_id
        self.builder = RequestBuilder(loaded, {model_id, str(loaded.path)}, drafts)
        self.metrics = ServerMetrics(model_id)
        self.api_key = api_key
        self.created = int(time.time())

    def app(self) -> Starlette:
        """The ASGI application."""
        routes = [
            Route("/v1/chat/completions", self._guard(self.chat), methods=["POST"]),
            Route("/v1/completions", self._guard(self.completions), methods=["POST"]),
            Route("/v1/models", self._guard(self.models), methods=["GET"]),
            Route("/health", self._guard(self.health), methods=["GET"]),
            Route("/metrics", self._guard(self.prometheus), methods=["GET"]),
        ]
        app = Starlette(routes=routes)
        app.add_exception_handler(404, _not_found)
        app.add_exception_handler(405, _not_allowed)
        return app

    def _guard(self, handler: Handler) -> Handler:
        """Check the key, then turn client mistakes into their 4xx and bugs into a logged 500."""

        async def guarded(request: Request) -> Response:
            try:
                self._authorize(request)
                return await handler(request)
            except APIError as exc:
                return JSONResponse(exc.body(), exc.status)
            except Exception:
                log.exception("request failed")
                error = APIError("the server failed on this request", 500, type="server_error")
                return JSONResponse(error.body(), 500)

        return guarded

    def _authorize(self, request: Request) -> None:
        if self.api_key is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        expected = self.api_key.encode("utf-8")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.strip().encode("utf-8"), expected
        ):
            raise APIError(
                "missing or wrong API key: send Authorization: Bearer <key>",
                401,
                code="invalid_api_key",
            )

    # --- routes ----------------------------------------------------------------------------------

    async def chat(self, request: Request) -> Response:
        body = _validate(ChatCompletionRequest, await _json_body(request))
        prepared = await self.builder.chat(body)
        responder = ChatResponder(self.model_id, prepared)
        tokens = self._tokens(prepared)
        if body.stream:
            return EventStream(responder.chunks(tokens, body.include_usage))
        return JSONResponse(await _unless_disconnected(request, responder.whole(tokens)))

    async def completions(self, request: Request) -> Response:
        body = _validate(CompletionRequest, await _json_body(request))
        prepared = self.builder.completion(body)
        responder = CompletionResponder(self.model_id)
        tokens = self._tokens(prepared)
        if body.stream:
            return EventStream(responder.chunks(tokens, body.include_usage))
        return JSONResponse(await _unless_disconnected(request, responder.whole(tokens)))

    async def models(self, request: Request) -> Response:
        card = {
            "id": self.model_id,
            "object": "model",
            "created": self.created,
            "owned_by": "clawloop",
            "max_model_len": self.loaded.engine.max_model_len,
        }
        return JSONResponse({"object": "list", "data": [card]})

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def prometheus(self, request: Request) -> Response:
        text = self.metrics.render(self.loaded.engine.stats)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    def _tokens(self, prepared: Prepared) -> AsyncIterator[Any]:
        return bridge.generate(
            self.loaded.engine,
            prepared.prompt_ids,
            prepared.params,
            prepared.constraint,
            self.metrics,
            time.perf_counter(),
        )


class EventStream(Response):
    """Server-sent events from an async iterator of JSON chunks, ending with ``[DONE]``.

    It watches for the client leaving and then closes the iterator, which aborts the request.
    An engine failure after the stream started is sent as an ``error`` event.
    """

    media_type = "text/event-stream"

    def __init__(self, chunks: AsyncIterator[dict[str, Any]]) -> None:
        # Not Response.__init__: it would announce a zero content length.
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
        ]
        self.chunks = chunks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sender = asyncio.ensure_future(self._send_all(send))
        watcher = asyncio.ensure_future(_wait_disconnect(receive))
        try:
            await asyncio.wait([sender, watcher], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sender, watcher):
                task.cancel()
            await asyncio.gather(sender, watcher, return_exceptions=True)
            await self.chunks.aclose()  # type: ignore[attr-defined]

    async def _send_all(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        try:
            async for chunk in self.chunks:
                await send({"type": "http.response.body", "body": _event(chunk), "more_body": True})
        except EngineFailed as exc:
            error = APIError(str(exc), 500, type="server_error")
            await send(
                {"type": "http.response.body", "body": _event(error.body()), "more_body": True}
            )
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, ensure_ascii=False).encode("utf-8") + b"\n\n"


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _unless_disconnected(request: Request, work: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    """Await ``work``; if the client leaves first, cancel it (its request is aborted)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_wait_disconnect(request.receive))
    try:
        await asyncio.wait([task, watcher], return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
    if task.cancelled():
        raise APIError("the client disconnected", 499, code="client_closed_request")
    try:
        return task.result()
    except EngineFailed as exc:
        raise APIError(str(exc), 500, type="server_error") from None


async def _json_body(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise APIError(f"the request body is not valid JSON: {exc}", code="invalid_json") from None


def _validate(model: Any, data: Any) -> Any:
    if not isinstance(data, dict):
        raise APIError("the request body must be a JSON object", code="invalid_value")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc) from None


async def _not_found(request: Request, exc: Exception) -> Response:
    error = APIError(f"no route {request.url.path}", 404, code="not_found")
    return JSONResponse(error.body(), 404)


async def _not_allowed(request: Request, exc: Exception) -> Response:
    error = APIError(f"{request.method} is not allowed on {request.url.path}", 405)
    return JSONResponse(error.body(), 405)
