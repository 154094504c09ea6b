"""`agent web`'s routes: the chat page and its stream, approvals, Stop, the traces and their
grades, the saved sessions, the eval reports and the operations page.

Pages are rendered on the server by Jinja with autoescaping on; the scripts are static files
of this package. Every request passes the checks of :mod:`connectors.web.security` first.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from jinja2 import Environment, PackageLoader
from pydantic import BaseModel, Field, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agent.errors import UserError
from agent.messages import AssistantMessage, UserMessage
from connectors.web.chat import WebChats
from connectors.web.evals import EvalRuns, flips, read_runs, suite_points
from connectors.web.files import FilesRefused, SentFile, decode, save_all
from connectors.web.ops import Act, Action, Gather
from connectors.web.plot import chart
from connectors.web.security import PAGE_HEADER, Guard, GuardMiddleware
from connectors.web.sessions import Sessions
from connectors.web.stream import sse
from connectors.web.traces import grade, timeline, trace_rows

STATIC = Path(__file__).parent / "static"
OPS_PAGE = "ops-page"  # what /ops's script sends as its page, for its CSRF token
TRACE_PAGE = "trace-page"  # what a timeline's grade buttons send as their page
Body = TypeVar("Body", bound=BaseModel)


@dataclass(slots=True)
class WebConfig:
    """What the app serves: the chats, the traces and eval reports, the operations page's
    content, and who may reach it."""

    chats: WebChats
    traces_dir: Path
    guard: Guard
    evals_dir: Path | None = None
    ops: Gather | None = None
    act: Act | None = None  # the changes /ops makes
    title: str = "clawloop"
    workspace: Path | None = None  # files sent with a message go to its inbox/
    max_file_bytes: int = 20 * 1024 * 1024
    sessions: Sessions | None = None  # the saved sessions /sessions lists and searches


class SendBody(BaseModel):
    message: str = Field(max_length=100_000)
    files: list[SentFile] = Field(default_factory=list, max_length=20)


class ActBody(BaseModel):
    action: Action
    target: str = Field(min_length=1, max_length=200)


class GradeBody(BaseModel):
    grade: Literal["good", "bad"]
    note: str = Field(default="", max_length=2_000)


class AnswerBody(BaseModel):
    id: str = Field(min_length=1, max_length=64)
    answer: Literal["once", "always", "deny"]


def new_session_name() -> str:
    """A fresh session name for a new tab, like `agent chat`'s, marked as the web page's."""
    return f"web-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def create_app(config: WebConfig) -> Starlette:
    """The ASGI app; run it with uvicorn on ``config.guard``'s host and port."""
    env = Environment(
        loader=PackageLoader("connectors.web", "templates"),
        autoescape=True,  # every value the pages show comes from the model, tools or files
    )
    chats = config.chats

    def page(name: str, status: int = 200, **values: object) -> HTMLResponse:
        html = env.get_template(name).render(title=config.title, **values)
        return HTMLResponse(html, status_code=status)

    async def chat_page(request: Request) -> Response:
        name = request.query_params.get("session")
        history: list[tuple[str, str]] = []
        busy = False
        if name is None:
            name = new_session_name()  # registered by its first message
        else:
            try:
                chat = chats.chat(name)  # a reloaded tab: its session so far
            except UserError as exc:
                return page("error.html.jinja", 400, message=exc.message)
            busy = chat.running is not None
            history = [
                (m.role, m.content)
                for m in chat.session.messages
                if isinstance(m, UserMessage | AssistantMessage) and isinstance(m.content, str)
                if m.content
            ]
        return page(
            "chat.html.jinja",
            session=name,
            csrf=config.guard.csrf_for(name),
            history=history,
            busy=busy,
        )

    async def send(request: Request) -> Response:
        body = await _body(request, SendBody)
        if isinstance(body, Response):
            return body
        name = request.headers[PAGE_HEADER]
        if not body.message.strip() and not body.files:
            return JSONResponse({"error": "the message is empty"}, status_code=400)
        try:
            if not await chats.settle(name):
                return JSONResponse({"error": "a turn is already running here"}, status_code=409)
            text = await _with_files(config, body)
        except FilesRefused as exc:
            return JSONResponse({"error": exc.message}, status_code=413)
        except UserError as exc:
            return JSONResponse({"error": exc.message}, status_code=400)
        stream = chats.play(name, text)

        async def frames() -> AsyncIterator[bytes]:
            try:
                async for item in stream:
                    yield sse(item)
                yield sse({"type": "done"})
            finally:
                await stream.aclose()  # a page that went away stops its turn (see chat.py)

        return StreamingResponse(
            frames(),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    async def approve(request: Request) -> Response:
        body = await _body(request, AnswerBody)
        if isinstance(body, Response):
            return body
        if not chats.answer(request.headers[PAGE_HEADER], body.id, body.answer):
            return JSONResponse({"error": f"no open approval {body.id}"}, status_code=404)
        return JSONResponse({"ok": True})

    async def stop(request: Request) -> Response:
        return JSONResponse({"stopped": chats.stop(request.headers[PAGE_HEADER])})

    async def traces(request: Request) -> Response:
        query = request.query_params.get("q", "")
        return page("traces.html.jinja", rows=trace_rows(config.traces_dir, query=query), q=query)

    async def trace(request: Request) -> Response:
        try:
            view = timeline(config.traces_dir, request.path_params["run_id"])
        except UserError as exc:
            return page("error.html.jinja", 404, message=exc.message)
        return page(
            "trace.html.jinja", t=view, page_name=TRACE_PAGE, csrf=config.guard.csrf_for(TRACE_PAGE)
        )

    async def trace_grade(request: Request) -> Response:
        body = await _body(request, GradeBody)
        if isinstance(body, Response):
            return body
        run_id = request.path_params["run_id"]
        try:
            graded = await run_in_threadpool(
                grade, config.traces_dir, run_id, body.grade, body.note
            )
        except UserError as exc:
            return JSONResponse({"error": exc.message}, status_code=404)
        return JSONResponse({"done": f"graded {graded} {body.grade}"})

    async def sessions(request: Request) -> Response:
        query = request.query_params.get("q", "").strip()[:500]
        if config.sessions is None:
            return page("sessions.html.jinja", rows=[], hits=[], query=query, searched=False)
        if query:
            hits = await run_in_threadpool(config.sessions.search, query)
            return page("sessions.html.jinja", rows=[], hits=hits, query=query, searched=True)
        rows = await run_in_threadpool(config.sessions.listed)
        return page("sessions.html.jinja", rows=rows, hits=[], query="", searched=False)

    def eval_runs() -> EvalRuns:
        return read_runs(config.evals_dir) if config.evals_dir else EvalRuns()

    async def evals(request: Request) -> Response:
        found = eval_runs()
        plots = {suite: chart(suite_points(rs)) for suite, rs in found.suites().items()}
        runs = list(reversed(found.runs))
        return page("evals.html.jinja", runs=runs, plots=plots, unreadable=found.unreadable)

    async def eval_run(request: Request) -> Response:
        found = eval_runs()
        try:
            run = found.get(request.path_params["run_id"])
        except UserError as exc:
            return page("error.html.jinja", 404, message=exc.message)
        series = found.suites()[run.report.suite]
        return page("eval_run.html.jinja", run=run, plot_chart=chart(suite_points(series)))

    async def eval_compare(request: Request) -> Response:
        found = eval_runs()
        try:
            a = found.get(request.query_params.get("a", ""))
            b = found.get(request.query_params.get("b", ""))
        except UserError as exc:
            return page("error.html.jinja", 404, message=exc.message)
        return page("eval_compare.html.jinja", a=a, b=b, flips=flips(a, b))

    async def ops(request: Request) -> Response:
        sections = await run_in_threadpool(config.ops) if config.ops else []
        return page(
            "ops.html.jinja",
            sections=sections,
            page_name=OPS_PAGE,
            csrf=config.guard.csrf_for(OPS_PAGE),
            changes=config.act is not None,
        )

    async def ops_act(request: Request) -> Response:
        body = await _body(request, ActBody)
        if isinstance(body, Response):
            return body
        if config.act is None:
            return JSONResponse({"error": "this page makes no changes"}, status_code=404)
        try:
            done = await run_in_threadpool(config.act, body.action, body.target)
        except UserError as exc:
            return JSONResponse({"error": exc.message}, status_code=400)
        return JSONResponse({"done": done})

    app = Starlette(
        routes=[
            Route("/", chat_page),
            Route("/chat/send", send, methods=["POST"]),
            Route("/chat/approve", approve, methods=["POST"]),
            Route("/chat/stop", stop, methods=["POST"]),
            Route("/traces", traces),
            Route("/traces/{run_id}", trace),
            Route("/traces/{run_id}/grade", trace_grade, methods=["POST"]),
            Route("/sessions", sessions),
            Route("/evals", evals),
            Route("/evals/compare", eval_compare),
            Route("/evals/{run_id}", eval_run),
            Route("/ops", ops),
            Route("/ops/act", ops_act, methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        middleware=[Middleware(GuardMiddleware, guard=config.guard)],
        lifespan=_closing(chats),
    )
    return app


async def _with_files(config: WebConfig, body: SendBody) -> str:
    """The turn's text: the message, and a line naming each file saved in the inbox."""
    if not body.files:
        return body.message
    if config.workspace is None:
        raise UserError("this page takes no files: it has no workspace")
    files = decode(body.files, config.max_file_bytes)  # every file checked before any is saved
    workspace = config.workspace
    try:
        return await run_in_threadpool(save_all, workspace, files, body.message)
    except OSError as exc:
        raise UserError(f"the files could not be saved in the inbox: {exc.strerror}") from None


async def _body(request: Request, model: type[Body]) -> Body | Response:
    """The request's JSON body validated as ``model``, or a 400 saying what is wrong."""
    try:
        return model.model_validate_json(await request.body())
    except ValidationError as exc:
        return JSONResponse({"error": exc.errors()[0]["msg"]}, status_code=400)


def _closing(
    chats: WebChats,
) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    """Running turns are stopped when the server shuts down."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            chats.close()

    return lifespan
