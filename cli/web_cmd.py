"""`agent web`: a local web page to chat with the agent, answer its asks, read its traces and
eval reports, and see its pairings, skills, jobs, usage and sandbox."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from agent.backend import Backend
from agent.errors import UserError
from agent.loop import AgentLoop
from cli.config import Settings, load_settings
from cli.console import SafeConsole
from cli.evals.store import reports_dir
from cli.options import BackendOpt, SandboxOpt, ScriptOpt, WorkspaceOpt
from cli.wiring import build_backend, build_loop, settings_toolbox, traced_runs

if TYPE_CHECKING:
    from starlette.applications import Starlette

WEB_INSTALL_HINT = "pip install 'clawloop[serve]'"
err_console = SafeConsole(stderr=True, highlight=False)

HostOpt = Annotated[
    str,
    typer.Option(help="Address to listen on; any but loopback also needs --token."),
]
PortOpt = Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")]
TokenOpt = Annotated[
    str | None,
    typer.Option("--token", help="Require this token on every request (a cookie once opened)."),
]
ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Model for the backend.")]


def check_exposure(host: str, token: str | None) -> None:
    """Beyond loopback the page is reachable by others: refuse to listen there without a token."""
    from connectors.web.security import is_loopback

    if not is_loopback(host) and not token:
        raise UserError(
            f"--host {host} is reachable from other machines: pass --token with a long random "
            "value too (or keep the default 127.0.0.1)"
        )


def web_app(
    settings: Settings,
    host: str,
    port: int,
    token: str | None = None,
    backend: Backend | None = None,
) -> Starlette:
    """The page's app wired from settings: the backend, the toolbox behind approvals, the loop.

    Every turn is traced like `agent chat`'s and its session kept in the sessions folder.
    """
    check_exposure(host, token)
    model = backend or build_backend(settings)
    # No standing approver: every ask is an event the page shows with its buttons.
    toolbox = settings_toolbox(settings, None, None, model)
    return page_app(settings, build_loop(settings, model, toolbox), host, port, token)


def page_app(
    settings: Settings,
    loop: AgentLoop,
    host: str,
    port: int,
    token: str | None = None,
    always: list[str] | None = None,
) -> Starlette:
    """The page's app around an existing loop (`agent web`'s own, or the gateway's).

    ``always`` is the list of allow rules said "always" to since the start, shared with the
    gateway's chats when the page runs inside it.
    """
    try:
        from cli.web_actions import ops_act
        from cli.web_ops import ops_sections
        from cli.web_sessions import web_sessions
        from connectors.web.app import WebConfig, create_app
        from connectors.web.chat import WebChats
        from connectors.web.security import Guard
    except ImportError as exc:
        raise UserError(f"agent web needs {exc.name}: run {WEB_INSTALL_HINT}") from None
    check_exposure(host, token)
    runs = traced_runs(settings, loop)  # built once: a turn does not climb back into cli/
    chats = WebChats(
        lambda session, text, context: runs.run(session, text, {"front_end": "web"}, context),
        settings.sessions_dir,
        settings.approval_timeout,
        always=always,
    )
    guard = Guard(host, port, token)
    return create_app(
        WebConfig(
            chats,
            settings.traces_dir,
            guard,
            evals_dir=reports_dir(settings.data_dir),
            ops=lambda: ops_sections(settings),
            act=lambda action, target: ops_act(settings, action, target),
            workspace=settings.workspace.expanduser().resolve(),
            max_file_bytes=int(settings.gateway.max_file_mb * 1024 * 1024),
            sessions=web_sessions(settings),
        )
    )


def web(
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8765,
    token: TokenOpt = None,
    backend: BackendOpt = None,
    model: ModelOpt = None,
    script: ScriptOpt = None,
    workspace: WorkspaceOpt = None,
    sandbox: SandboxOpt = None,
) -> None:
    """Serve a local web page: chat, approve tool calls, read traces, eval runs and status.

    It listens on 127.0.0.1 unless --host says otherwise, and then only with --token.
    """
    check_exposure(host, token)
    try:
        import uvicorn
    except ImportError:
        raise UserError(f"agent web needs uvicorn: run {WEB_INSTALL_HINT}") from None
    overrides: dict[str, Any] = {
        "backend": "fake" if script else backend,
        "model": model,
        "workspace": workspace,
        "sandbox.backend": sandbox,
    }
    settings = load_settings(overrides)
    model_backend = build_backend(settings, {"script": str(script)} if script else None)
    app = web_app(settings, host, port, token, model_backend)
    shown = f"[{host}]" if ":" in host else host
    address = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    err_console.print(f"clawloop web page on {address} (Ctrl-C to stop)")
    if not _loopback(host):
        # The token keeps strangers out, but plain HTTP shows it to anyone on the path.
        err_console.print(
            "[bold red]reachable from other machines over plain HTTP: use it on a network "
            "you trust, or behind a TLS proxy[/bold red]"
        )
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


def _loopback(host: str) -> bool:
    from connectors.web.security import is_loopback

    return is_loopback(host)
