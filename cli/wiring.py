"""Wires concrete parts together from settings: a backend, a toolbox, a loop, a session."""

from __future__ import annotations

import datetime as dt
import os
import secrets
from typing import Any

from agent.backend import Backend
from agent.errors import UserError
from agent.loop import AgentLoop, Decoding, LoopLimits
from agent.plugins import collect, plugin_manager
from agent.prompts import load_prompt
from agent.session import Session, check_session_name
from agent.tools import Toolbox
from cli.config import Settings
from skills.guard import Approver


def backend_factories() -> dict[str, Any]:
    """Every registered backend factory, built-in and plugin, by name."""
    return collect(plugin_manager(), "register_backends")


def build_backend(settings: Settings, extra: dict[str, Any] | None = None) -> Backend:
    """The backend named in settings, built with its options."""
    factories = backend_factories()
    factory = factories.get(settings.backend)
    if factory is None:
        known = ", ".join(sorted(factories)) or "(none: is clawloop installed?)"
        raise UserError(f"unknown backend {settings.backend!r}: choose one of {known}")
    options = {**settings.backend_options(), **(extra or {})}
    backend: Backend = factory(**options)
    return backend


def build_toolbox(settings: Settings, approver: Approver | None) -> Toolbox:
    """The skills' tools, each behind the sandbox policy and approvals.

    With ``approver`` None, asks are events for the front end; "always" answers are saved to
    the config file.
    """
    from skills.context import SkillContext
    from skills.toolbox import build_toolbox as build

    workspace = settings.workspace.expanduser().resolve()
    if not workspace.is_dir():
        raise UserError(
            f"workspace {workspace} is not a folder: pass --workspace with an existing folder"
        )
    if settings.sandbox.mode != "read-only" and not os.access(workspace, os.W_OK):
        raise UserError(
            f"workspace {workspace} is not writable: pass --workspace with a folder you "
            "can write to, or use --mode read-only"
        )
    context = SkillContext.from_settings(settings.model_copy(update={"workspace": workspace}))
    return build(context, approver, enabled=settings.skills, save_rule=_save_allow_rule(settings))


def _save_allow_rule(settings: Settings) -> Any:
    from cli.config import add_rule

    def save(rule: str) -> None:
        add_rule("allow", rule, settings.config_path)

    return save


def build_loop(settings: Settings, backend: Backend, toolbox: Toolbox) -> AgentLoop:
    """The agent loop with the settings' limits and decoding."""
    d = settings.decoding
    return AgentLoop(
        backend=backend,
        toolbox=toolbox,
        system_prompt=load_prompt("system"),
        limits=LoopLimits(
            max_steps=settings.max_steps,
            time_budget_s=settings.time_budget,
            tool_timeout_s=settings.tool_timeout,
        ),
        decoding=Decoding(
            temperature=d.temperature,
            top_p=d.top_p,
            top_k=d.top_k,
            max_tokens=d.max_tokens,
            seed=d.seed,
        ),
    )


def open_session(settings: Settings, name: str | None) -> tuple[str, Session]:
    """The named session (continued if it exists), or a new one with a fresh name."""
    if name is None:
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        name = f"{stamp}-{secrets.token_hex(2)}"
    check_session_name(name)
    path = settings.sessions_dir / f"{name}.jsonl"
    try:
        settings.sessions_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"cannot create the sessions folder {settings.sessions_dir}: {exc.strerror} "
            "(set CLAWLOOP_DATA_DIR to a writable folder)"
        ) from None
    return name, Session.open(path)
