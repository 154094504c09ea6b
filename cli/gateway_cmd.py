"""`agent gateway`: the enabled chat connectors and the agent, in one foreground process."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agent.errors import UserError
from agent.plugins import collect, plugin_manager
from cli.config import Settings, load_settings
from cli.cron_cmd import store_for
from cli.cron_jobs import gateway_executor
from cli.gateway_web import web_server
from cli.options import BackendOpt, ScriptOpt, WorkspaceOpt
from cli.wiring import build_backend, build_loop, settings_toolbox, traced_runs
from connectors.access import AccessList
from connectors.base import Connector
from connectors.cron.clock import clock_from_env
from connectors.cron.schedule import zone
from connectors.cron.scheduler import Scheduler, SchedulerBusy
from connectors.gateway import Gateway, GatewayAgent, GatewayOptions
from connectors.logs import log, setup_logging
from connectors.settings import DiscordSettings, TelegramSettings
from connectors.state import GatewayState
from sandbox.secrets import find_secrets

if TYPE_CHECKING:
    import uvicorn

SHUTDOWN_LIMIT_S = 12.0

CheckOpt = Annotated[
    bool, typer.Option("--check", help="Validate the config and the bots' tokens, then exit.")
]
ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Model for the backend.")]


def gateway_dir(settings: Settings) -> Path:
    """Where the gateway keeps its state and the pairings."""
    return settings.data_dir / "gateway"


def access_list(settings: Settings) -> AccessList:
    """Owners and allowed ids from the config, pairings from the data folder."""
    tables: dict[str, TelegramSettings | DiscordSettings] = {
        "telegram": settings.connectors.telegram,
        "discord": settings.connectors.discord,
    }
    return AccessList(
        gateway_dir(settings) / "pairing.json",
        {name: t.owner_ids for name, t in tables.items()},
        {name: t.allow_ids for name, t in tables.items()},
    )


def build_connectors(settings: Settings, state: GatewayState) -> list[Connector]:
    """The enabled connectors, each built by its registered factory."""
    factories = collect(plugin_manager(groups=("clawloop.connectors",)), "register_connectors")
    connectors: list[Connector] = []
    for name in ("telegram", "discord"):
        table = getattr(settings.connectors, name)
        if not table.enabled:
            continue
        if not table.token:
            raise UserError(
                f"[connectors.{name}] is enabled but has no token: set token there "
                f"or CLAWLOOP_{name.upper()}_TOKEN"
            )
        if not table.owner_ids:
            log(
                logging.WARNING,
                "no_owner",
                connector=name,
                hint=f"set [connectors.{name}] owner_ids",
            )
        connectors.append(factories[name](table, table.token, state))
    if not connectors and not settings.connectors.web.enabled:
        raise UserError(
            "no connector is enabled: set enabled = true and a token under "
            "[connectors.telegram] or [connectors.discord], or enabled = true under "
            "[connectors.web] (see docs/connectors.md)"
        )
    return connectors


def gateway(
    check: CheckOpt = False,
    backend: BackendOpt = None,
    model: ModelOpt = None,
    script: ScriptOpt = None,
    workspace: WorkspaceOpt = None,
) -> None:
    """Run the chat bots (Telegram, Discord) in the foreground until SIGINT or SIGTERM."""
    settings = load_settings(
        {
            "backend": "fake" if script else backend,
            "model": model,
            "workspace": workspace,
        }
    )
    setup_logging(find_secrets(settings.model_dump(), os.environ))
    state = GatewayState(gateway_dir(settings) / "state.json")
    connectors = build_connectors(settings, state)
    if check:
        asyncio.run(_check(connectors))
        typer.echo("config and tokens are valid")
        return
    bot_backend = build_backend(settings, {"script": str(script)} if script else None)
    # The skills folder is watched: a skill added, changed or approved is used from the next turn.
    toolbox = settings_toolbox(settings, None, _skills_notice, bot_backend)
    loop = build_loop(settings, bot_backend, toolbox)
    options = GatewayOptions(
        ask_timeout_s=settings.approval_timeout,
        rate_per_minute=settings.gateway.rate_per_minute,
        rate_burst=settings.gateway.rate_burst,
        max_turns_at_once=settings.gateway.max_turns_at_once,
        accept_files=settings.gateway.accept_files,
        max_file_bytes=int(settings.gateway.max_file_mb * 1024 * 1024),
        workspace=settings.workspace.expanduser().resolve(),
    )
    agent = GatewayAgent(loop, settings.model or settings.backend, traced_runs(settings, loop))
    gw = Gateway(connectors, agent, settings.sessions_dir, access_list(settings), state, options)
    scheduler = Scheduler(
        store_for(settings),
        clock_from_env(),
        gateway_executor(settings, gw, loop),
        zone(settings.cron.timezone),
        dt.timedelta(minutes=settings.cron.grace_minutes),
    )
    page = web_server(settings, loop, gw.always)  # shares the gateway's "always" rules
    asyncio.run(_serve(gw, scheduler, page))
    _exit_now_if_tools_linger()


def _skills_notice(text: str) -> None:
    log(logging.INFO, "skills_reloaded", message=text)


async def _check(connectors: list[Connector]) -> None:
    for connector in connectors:
        name = await connector.check()
        typer.echo(f"{connector.name}: ok ({name})")
        await connector.stop()


async def _serve(gw: Gateway, scheduler: Scheduler, page: uvicorn.Server | None = None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await gw.start()
    log(logging.INFO, "gateway_ready", connectors=list(gw.connectors))
    jobs = asyncio.create_task(_run_jobs(scheduler, stop))
    web = asyncio.create_task(_run_page(page)) if page is not None else None
    await stop.wait()
    log(logging.INFO, "shutting_down")
    if web is not None and page is not None:
        page.should_exit = True  # the page's running turns are stopped as it closes
        with contextlib.suppress(Exception):
            await asyncio.wait_for(web, timeout=SHUTDOWN_LIMIT_S)
    jobs.cancel()  # a job cut short is recorded as interrupted by the next scheduler
    with contextlib.suppress(asyncio.CancelledError):
        await jobs
    try:
        await asyncio.wait_for(gw.stop(), timeout=SHUTDOWN_LIMIT_S)
    except TimeoutError:
        log(logging.WARNING, "shutdown_timed_out")


async def _run_jobs(scheduler: Scheduler, stop: asyncio.Event) -> None:
    """The scheduled jobs, beside the chats; another scheduler running them is only logged."""
    try:
        await scheduler.serve(stop)
    except SchedulerBusy as busy:
        log(logging.WARNING, "cron_not_run_here", reason=busy.message)
    except Exception as exc:  # the chats go on without the jobs
        log(logging.ERROR, "cron_failed", error=repr(exc))


async def _run_page(page: uvicorn.Server) -> None:
    """The web page beside the chats; a page that cannot listen is logged, the chats go on."""
    config = page.config
    log(logging.INFO, "web_page", address=f"http://{config.host}:{config.port}/")
    try:
        await page.serve()
    except (Exception, SystemExit) as exc:  # uvicorn exits when its port is taken
        log(logging.ERROR, "web_page_failed", error=repr(exc))


def _exit_now_if_tools_linger() -> None:
    """A tool still running in a worker thread must not hold the process past its shutdown.

    Its turn is still recorded as in flight, so it is answered after the restart.
    """
    busy = [t for t in threading.enumerate() if t.name.startswith(("turn", "tool-"))]
    if busy:
        log(logging.WARNING, "exit_with_tools_running", threads=len(busy))
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
