"""Approvals as events: the loop asks through ``ApprovalRequested`` and waits for an answer.

The tools are the real skills behind the real guard and the bubblewrap sandbox; the terminal's
answers go through the very event a chat front end answers.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from agent.approvals import ApprovalBroker, Gate
from agent.errors import ToolError
from agent.events import (
    ApprovalRequested,
    ApprovalResolved,
    Event,
    FinalEvent,
    ToolResultEvent,
    event_to_json,
)
from agent.loop import AgentLoop, LoopLimits
from agent.messages import AssistantMessage, ToolCall
from agent.run_context import RunContext, current_call, current_run
from agent.session import Session
from agent.tools import Toolbox, function_tool
from backends.fake import FakeBackend
from cli.approvals import AutoApprover, TerminalApprover, answer_event
from sandbox.settings import ResourceLimits, SandboxSettings
from skills.context import SkillContext
from skills.guard import GuardedTool
from skills.toolbox import build_toolbox


def shell(command: str) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall.make("shell", {"command": command})])


def make_toolbox(ws: Path, saved: list[str] | None = None) -> tuple[Toolbox, SkillContext]:
    context = SkillContext.create(ws, SandboxSettings(limits=ResourceLimits(timeout_s=20)))
    save = saved.append if saved is not None else None
    return build_toolbox(context, None, save_rule=save), context


def drive(loop: AgentLoop, ctx: RunContext, on_ask: Any, task: str = "task") -> list[Event]:
    events: list[Event] = []
    for event in loop.run(Session(), task, ctx):
        events.append(event)
        if isinstance(event, ApprovalRequested):
            on_ask(event)
    return events


def of(events: list[Event], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def test_terminal_answers_through_the_event_and_the_call_runs_in_the_sandbox(ws: Path) -> None:
    toolbox, _ = make_toolbox(ws)
    loop = AgentLoop(
        FakeBackend([shell("touch made && echo $(id -u)"), AssistantMessage(content="done")]),
        toolbox,
    )
    ctx = RunContext(ask_timeout_s=30)
    out = Console(record=True, width=120)
    approver = TerminalApprover(out, prompt=lambda q: "o")
    events = drive(loop, ctx, lambda ev: answer_event(ev, approver, ctx))
    [ask] = of(events, ApprovalRequested)
    assert ask.call.function.name == "shell" and "touch made" in ask.summary
    assert ask.reason == "default: no rule allows this" and ask.suggestion.startswith("shell(")
    assert ask.run_id == ctx.run_id and event_to_json(ask)["call"]["function"]["name"] == "shell"
    assert "approve this tool call?" in out.export_text()
    [resolved] = of(events, ApprovalResolved)
    assert (resolved.id, resolved.outcome, resolved.by) == (ask.id, "once", "user")
    [result] = of(events, ToolResultEvent)
    assert result.ok and "65534" in result.content  # ran as the sandbox's uid
    assert (ws / "made").exists()


def test_a_denied_or_expired_ask_never_runs_and_the_model_is_told(ws: Path) -> None:
    toolbox, _ = make_toolbox(ws)
    script = [shell("touch nope1"), shell("touch nope2"), AssistantMessage(content="ok")]
    backend = FakeBackend(script)
    loop = AgentLoop(backend, toolbox)
    ctx = RunContext(ask_timeout_s=0.4)
    answers = iter(["deny", None])

    def on_ask(event: ApprovalRequested) -> None:
        answer = next(answers)
        if answer:
            ctx.approvals.answer(event.id, answer, "tester")  # type: ignore[arg-type]

    began = time.monotonic()
    events = drive(loop, ctx, on_ask)
    assert [e.outcome for e in of(events, ApprovalResolved)] == ["deny", "expired"]
    first, second = of(events, ToolResultEvent)
    assert not first.ok and "declined" in first.content
    assert not second.ok and "nobody answered" in second.content and "0.4 s" in second.content
    assert "nobody answered" in backend.requests[2].messages[-1].content  # the model saw it
    assert not (ws / "nope1").exists() and not (ws / "nope2").exists()
    assert time.monotonic() - began < 10


def test_the_tool_timeout_starts_once_approved(ws: Path) -> None:
    toolbox, _ = make_toolbox(ws)
    loop = AgentLoop(
        FakeBackend([shell("sleep 0.3; echo slept"), AssistantMessage(content="ok")]),
        toolbox,
        limits=LoopLimits(tool_timeout_s=5),
    )
    ctx = RunContext(ask_timeout_s=30)

    def answer_late(event: ApprovalRequested) -> None:
        # Answered 6 s later, past the tool timeout: the wait must not count against it.
        threading.Timer(6.0, ctx.approvals.answer, (event.id, "once", "late")).start()

    events = drive(loop, ctx, answer_late)
    [result] = of(events, ToolResultEvent)
    assert result.ok and "slept" in result.content


def test_a_timed_out_call_is_cancelled_never_run_later() -> None:
    ran: list[str] = []
    gate = threading.Event()

    def slow(tag: str) -> str:
        """Block until released."""
        gate.wait(3)
        ran.append(tag)
        return tag

    turns = [
        AssistantMessage(tool_calls=[ToolCall.make("slow", {"tag": "a"})]),
        AssistantMessage(tool_calls=[ToolCall.make("slow", {"tag": "b"})]),
        AssistantMessage(content="gave up"),
    ]
    # One tool thread: "a" occupies it, so "b" is still queued when its timeout fires.
    ctx = RunContext(tool_workers=1)
    loop = AgentLoop(FakeBackend(turns), Toolbox([function_tool(slow)]),
                     limits=LoopLimits(tool_timeout_s=0.3))  # fmt: skip
    events = list(loop.run(Session(), "task", ctx))
    assert [r.ok for r in of(events, ToolResultEvent)] == [False, False]
    gate.set()
    time.sleep(0.5)
    ctx.close()
    assert ran == ["a"]  # "a" was already running; "b" never started, and never will


def test_always_changes_the_run_overlay_and_the_config_never_the_shared_policy(ws: Path) -> None:
    saved: list[str] = []
    toolbox, skills = make_toolbox(ws, saved)
    rules_before = list(skills.policy.rules)
    turns = [shell("touch a1"), shell("touch a1"), AssistantMessage(content="ok")]
    loop = AgentLoop(FakeBackend(turns), toolbox)
    ctx = RunContext(ask_timeout_s=30)
    asked: list[ApprovalRequested] = []

    def always(event: ApprovalRequested) -> None:
        asked.append(event)
        ctx.approvals.answer(event.id, "always", "tester")

    events = drive(loop, ctx, always)
    assert len(asked) == 1  # the second, identical call was allowed by the overlay
    assert [r.ok for r in of(events, ToolResultEvent)] == [True, True]
    assert saved == [asked[0].suggestion] and ctx.allowed == saved
    assert skills.policy.rules == rules_before
    # Another run with the same toolbox asks again: the overlay was that run's only.
    other = RunContext(ask_timeout_s=0.2)
    events = drive(AgentLoop(FakeBackend([shell("touch a1")]), toolbox), other, lambda e: None)
    assert [e.outcome for e in of(events, ApprovalResolved)] == ["expired"]


def test_stop_cancels_a_pending_ask_and_a_standing_approver_needs_no_event(ws: Path) -> None:
    toolbox, _ = make_toolbox(ws)
    ctx = RunContext(ask_timeout_s=30)
    loop = AgentLoop(FakeBackend([shell("touch x")]), toolbox)
    threading.Timer(0.3, ctx.stop).start()
    began = time.monotonic()
    events = drive(loop, ctx, lambda e: None)
    assert time.monotonic() - began < 5
    assert [e.outcome for e in of(events, ApprovalResolved)] == ["cancelled"]
    assert not (ws / "x").exists()

    context = SkillContext.create(ws, SandboxSettings())
    yes = build_toolbox(context, AutoApprover())
    events = list(
        AgentLoop(FakeBackend([shell("touch y"), AssistantMessage(content="ok")]), yes).run(
            Session(), "t"
        )
    )
    assert not of(events, ApprovalRequested) and of(events, FinalEvent)
    assert (ws / "y").exists()
    assert isinstance(yes.get("shell"), GuardedTool)


def test_the_broker_answers_once() -> None:
    broker = ApprovalBroker()
    pending = broker.open()
    assert broker.answer(pending.id, "once", "a") and not broker.answer(pending.id, "deny", "b")
    assert pending.wait(1, threading.Event()) == ("once", "a")
    assert not broker.answer("nope", "once", "a")


def test_the_loop_only_passes_on_what_a_tool_asks_through_its_run() -> None:
    def careful(text: str) -> str:
        """Asks a person before it answers."""
        run, call = current_run(), current_call()
        if run is None or call is None:
            raise ToolError("not in a run")
        gate = Gate("ask", "the tool asks", summary=f"careful({text})")
        call.decision, call.decided_by = run.ask(call, gate)
        return f"{text}: {call.decision}"

    turns = [
        AssistantMessage(tool_calls=[ToolCall.make("careful", {"text": "x"})]),
        AssistantMessage(content="ok"),
    ]
    loop = AgentLoop(FakeBackend(turns), Toolbox([function_tool(careful)]))
    ctx = RunContext(ask_timeout_s=30)
    events = drive(loop, ctx, lambda e: ctx.approvals.answer(e.id, "once", "tester"))
    [ask] = of(events, ApprovalRequested)
    assert ask.summary == "careful(x)" and ask.call.function.name == "careful"
    assert [e.outcome for e in of(events, ApprovalResolved)] == ["once"]
    [result] = of(events, ToolResultEvent)
    assert result.ok and result.content == "x: once"
    assert (result.decision, result.decided_by) == ("once", "tester")
