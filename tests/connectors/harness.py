"""The gateway in-process, as ``agent gateway`` wires it, with a scripted fake model.

The model's script: a user message ``run: CMD`` makes it call the shell with ``CMD``; after a
tool result it answers ``done: <result>``; anything else it answers ``echo: <text>``. Every chat
gets the same script, so concurrent chats cannot lean on a shared order of turns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.backend import Backend
from agent.loop import AgentLoop, LoopLimits
from agent.messages import AssistantMessage, ChatRequest, ToolCall, ToolMessage, UserMessage
from agent.runs import TracedRuns
from backends.fake import FakeBackend
from connectors.access import AccessList
from connectors.base import Connector
from connectors.gateway import Gateway, GatewayAgent, GatewayOptions
from connectors.state import GatewayState
from sandbox.settings import ResourceLimits, SandboxSettings
from skills.context import SkillContext
from skills.toolbox import build_toolbox
from tests.sandbox.sbx_support import processes_with as processes_with  # for the stop tests


def scripted(request: ChatRequest) -> AssistantMessage:
    """The fake model's one rule, applied to the conversation it is sent."""
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return AssistantMessage(content=f"done: {last.content}")
    text = last.content if isinstance(last, UserMessage) else ""
    text = text if isinstance(text, str) else ""
    if text.startswith("run: "):
        return AssistantMessage(tool_calls=[ToolCall.make("shell", {"command": text[5:]})])
    return AssistantMessage(content=f"echo: {text}")


def fake_backend() -> FakeBackend:
    return FakeBackend([scripted] * 100_000)


@dataclass
class Setup:
    gateway: Gateway
    backend: FakeBackend
    data: Path


def make_gateway(
    connectors: list[Connector],
    data: Path,
    ws: Path,
    owners: dict[str, list[str]],
    state: GatewayState,
    allowed: dict[str, list[str]] | None = None,
    *,
    allow_rules: list[str] | None = None,
    save_rule: Callable[[str], object] | None = None,
    backend: Backend | None = None,
    **options: Any,
) -> Setup:
    """The gateway over ``connectors``; ``allow_rules`` are ``[sandbox] allow`` rules."""
    fake = fake_backend()
    sandbox = SandboxSettings(limits=ResourceLimits(timeout_s=30), allow=allow_rules or [])
    context = SkillContext.create(ws, sandbox)
    toolbox = build_toolbox(context, None, save_rule=save_rule)
    loop = AgentLoop(backend or fake, toolbox, limits=LoopLimits(tool_timeout_s=30))
    access = AccessList(data / "pairing.json", owners, allowed or {})
    runs = TracedRuns(loop, data / "traces", "fake")  # as the CLI hands it its traced runs
    agent = GatewayAgent(loop, "fake", runs)
    gateway = Gateway(
        connectors, agent, data / "sessions", access, state, GatewayOptions(**options)
    )
    return Setup(gateway, fake, data)
