"""A scheduled job's run: the real agent loop, traced like ``agent run``, and its delivery.

Without the gateway (``agent cron tick``, ``agent cron serve``, ``agent cron run``) a job runs
unattended: every ask is refused, as for ``agent run`` without a terminal, and the answer is
printed. A job that delivers to a chat is then recorded "not delivered: no gateway running"
(the chat bots live in the gateway). In the gateway, a job for a chat runs as a turn in that
chat: its asks go there for an owner's ``/approve``, and its answer is sent there.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

from agent.events import ApprovalRequested, ErrorEvent, Event, FinalEvent
from agent.loop import AgentLoop
from agent.run_context import RunContext
from cli.approvals import DenyApprover, answer_event
from cli.config import Settings
from cli.wiring import build_backend, build_loop, open_session, run_traced, settings_toolbox
from connectors.cron.scheduler import Execute, Outcome
from connectors.cron.store import Job, RunRecord
from connectors.gateway import Gateway
from connectors.logs import log

QUIET_WORD = "NOTHING"
QUIET_NOTE = (
    f"\n\n(This runs on a schedule. If there is nothing worth reporting, reply exactly "
    f"{QUIET_WORD} and nothing else.)"
)
Run = Callable[[RunContext], Iterator[Event]]


def job_task(job: Job) -> str:
    """What the model is asked: the job's prompt, with the quiet rule for a heartbeat."""
    return job.prompt + (QUIET_NOTE if job.quiet else "")


def is_quiet(answer: str) -> bool:
    return re.sub(r"[^A-Za-z]", "", answer).upper() == QUIET_WORD


@dataclasses.dataclass
class Watch:
    """Notes a run's answer or error on its way to the front end; holds back a quiet answer."""

    job: Job
    answer: str | None = None
    error: str | None = None
    quiet: bool = False

    def events(self, events: Iterator[Event]) -> Iterator[Event]:
        for event in events:
            if isinstance(event, FinalEvent):
                self.answer = event.content
                if self.job.quiet and is_quiet(event.content):
                    self.quiet = True
                    continue
                event = dataclasses.replace(event, content=f"⏰ {self.job.name}\n{event.content}")
            elif isinstance(event, ErrorEvent):
                self.error = event.message
            yield event

    def outcome(self, delivered: str) -> Outcome:
        if self.quiet:
            return Outcome("skipped", "quiet: nothing to report")
        if self.answer is not None:
            return Outcome("done", delivered)
        return Outcome("failed", self.error or "the run ended without an answer")


def job_run(settings: Settings, loop: AgentLoop, job: Job, record: RunRecord) -> Run:
    """The job's run as a fresh session and its own trace, named after the job."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    _, session = open_session(settings, f"cron-{job.id}-{stamp}-{record.id}")
    extra: dict[str, Any] = {
        "front_end": "cron",
        "job": job.id,
        "scheduled_for": record.scheduled_for.isoformat(),
    }
    return lambda context: run_traced(settings, loop, session, job_task(job), extra, context)


class LoopHolder:
    """Builds the backend, tools and loop on first use and keeps them for the next job."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._loop: AgentLoop | None = None

    def get(self) -> AgentLoop:
        if self._loop is None:
            backend = build_backend(self.settings)
            toolbox = settings_toolbox(self.settings, None)
            self._loop = build_loop(self.settings, backend, toolbox)
        return self._loop


def run_unattended(
    settings: Settings, loop: AgentLoop, job: Job, record: RunRecord, watch: Watch
) -> None:
    """Run the job with nobody to ask: every ask is refused."""
    context = RunContext(
        run_id=record.run_id, ask_timeout_s=settings.approval_timeout, attended=False
    )
    approver = DenyApprover()
    try:
        for event in watch.events(job_run(settings, loop, job, record)(context)):
            if isinstance(event, ApprovalRequested):
                answer_event(event, approver, context)
    finally:
        context.close()


def terminal_delivery(job: Job, watch: Watch, print_line: Callable[[str], None]) -> str:
    """Print the answer; returns the delivery note for the run log."""
    if watch.quiet or watch.answer is None:
        return ""
    print_line(f"[{job.name}] {watch.answer}")
    if job.deliver == "terminal":
        return ""
    return f"not delivered to {job.deliver}: no gateway running (printed instead)"


def unattended_executor(
    settings: Settings, holder: LoopHolder, print_line: Callable[[str], None]
) -> Execute:
    """Runs jobs without the gateway; answers are printed with ``print_line``."""

    async def execute(job: Job, record: RunRecord) -> Outcome:
        watch = Watch(job)
        await asyncio.to_thread(lambda: run_unattended(settings, holder.get(), job, record, watch))
        return watch.outcome(terminal_delivery(job, watch, print_line))

    return execute


def gateway_executor(settings: Settings, gateway: Gateway, loop: AgentLoop) -> Execute:
    """Runs jobs in the gateway: a chat target's run is a turn in that chat."""

    def show(line: str) -> None:
        log(logging.INFO, "cron_answer", answer=line)

    async def execute(job: Job, record: RunRecord) -> Outcome:
        watch = Watch(job)
        platform, _, chat_id = job.deliver.partition(":")
        if platform in gateway.connectors and chat_id:
            run = job_run(settings, loop, job, record)
            await gateway.run_scheduled(
                platform, chat_id, job.name, lambda ctx: watch.events(run(ctx)), record.run_id
            )
            return watch.outcome(f"delivered to {job.deliver}")
        await asyncio.to_thread(lambda: run_unattended(settings, loop, job, record, watch))
        note = terminal_delivery(job, watch, show)
        if note:
            note = f"not delivered to {job.deliver}: that connector is not enabled (logged)"
        return watch.outcome(note)

    return execute
