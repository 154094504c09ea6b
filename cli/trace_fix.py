"""`agent traces fix ID --script turns.json`: replay a failed run's task with corrected turns.

(``--search`` finds the turns itself, for a run of `agent eval`: see :func:`fix_by_search`.)

The corrected turns (the scripted fake backend's format) go through the real loop, skills and
sandbox, with the profile and prompt the original run had, so the new trace holds exactly the
requests the model would see. A run of `agent eval` recorded its task (prompt, files, check):
it is run again in a fresh workspace built from the task and graded by the task's check. Any
other run replays its prompt in the workspace given (a fresh empty folder by default), and the
person vouches for the result. Either way the new trace is graded good by ``fix``, names the
run it fixes, and the original is marked as fixed.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import UserError
from agent.events import ErrorEvent, FinalEvent
from agent.messages import AssistantMessage
from agent.prompts import load_prompt
from agent.session import Session
from agent.trace import Trace, grade_trace, mark_fixed
from backends.fake import FakeBackend
from cli.approvals import AutoApprover, choose_approver
from cli.config import Settings
from cli.evals.generators.search import search_gold
from cli.evals.runner import Variant, run_task
from cli.evals.suite import Suite, Task
from cli.wiring import build_loop, run_traced, settings_toolbox
from skills.simple import ANSWER_TOOL

GRADER = "fix"


@dataclass(slots=True)
class FixedRun:
    """The corrected run: its id, and whether a task's check graded it (else the person did)."""

    run_id: str
    checked: bool
    answer: str | None = None
    failures: list[str] = field(default_factory=list)


def replay_settings(settings: Settings, start: dict[str, Any]) -> Settings:
    """``settings`` with the original run's profile and prompt, so the replay's requests are the
    ones that run saw (older traces without a profile: the answer tool marks the small one)."""
    tools = {t.get("function", {}).get("name") for t in start.get("tools") or []}
    profile = start.get("profile") or ("small" if ANSWER_TOOL in tools else "standard")
    updates: dict[str, Any] = {"profile": profile}
    prompt_id = str(start.get("prompt") or "").split("@")[0]
    if prompt_id:
        try:
            load_prompt(prompt_id)
            updates["prompt"] = prompt_id
        except UserError:
            pass  # a prompt file that is gone: the profile's own prompt stands in
    return settings.model_copy(update=updates)


def original_turns(trace: Trace) -> list[AssistantMessage]:
    """The assistant turns the original run gave, in order."""
    return [AssistantMessage.model_validate(r["message"]) for r in trace.of_type("step")]


def fix_by_script(
    settings: Settings,
    trace: Trace,
    turns: list[AssistantMessage],
    keep: int = 0,
    workspace: Path | None = None,
    yes: bool = False,
) -> FixedRun:
    """Replay ``trace``'s task with its first ``keep`` turns and then ``turns``; a UserError
    if the corrected run still fails (the original is then left as it was)."""
    start = trace.start
    if not start.get("task"):
        raise UserError(f"trace {trace.run_id} records no task to replay: fix it with --edit")
    kept = original_turns(trace)
    if keep > len(kept):
        raise UserError(
            f"--keep {keep}: run {trace.run_id} gave {len(kept)} turns: keep at most that many"
        )
    script = [*kept[:keep], *turns]
    backend = FakeBackend(script, when_done="")
    settings = replay_settings(settings, start)
    link = {"fixes": trace.run_id}
    if start.get("eval_task"):
        fixed = _rerun_task(settings, backend, start, link)
    else:
        fixed = _replay_prompt(settings, backend, start, link, workspace, yes)
    if len(backend.requests) > len(script):
        raise UserError(
            f"the script ran out after {len(script)} turns and the run wanted more: "
            "end it with the final answer"
            + (f" ({ANSWER_TOOL} call)" if settings.small_model else "")
        )
    if fixed.failures:
        raise UserError(
            f"the corrected run {fixed.run_id} still fails ({'; '.join(fixed.failures)}): "
            "correct the turns and run `agent traces fix` again"
        )
    mark_fixed(trace.path, fixed.run_id)
    return fixed


def fix_by_search(settings: Settings, trace: Trace) -> FixedRun:
    """Correct a failed run of `agent eval` by search: the first call of the tools its task's
    request offers, with values from the request, that passes the task's check
    (:mod:`cli.evals.generators.search`), stored as :func:`fix_by_script` stores any fix.
    The search's own tries run in a throwaway data folder; a UserError if none passes."""
    start = trace.start
    if not start.get("eval_task"):
        raise UserError(
            f"run {trace.run_id} is not from `agent eval`, so no check can judge a search: "
            "fix it with --script or --edit"
        )
    task = Task.model_validate(start["eval_task"])
    suite = Suite(name=str(start.get("suite") or "fix"), tasks=[task])
    with tempfile.TemporaryDirectory(prefix="clawloop-search-") as tmp:
        trial = replay_settings(settings, start).model_copy(update={"data_dir": Path(tmp)})
        found = search_gold(task, suite, trial)
    if found is None:
        raise UserError(
            f"no single call of the tools offered to run {trace.run_id} passes its task's "
            "check: fix it with --script or --edit"
        )
    return fix_by_script(settings, trace, found[2])


def _rerun_task(
    settings: Settings, backend: FakeBackend, start: dict[str, Any], link: dict[str, Any]
) -> FixedRun:
    """The recorded eval task, run again in a fresh workspace and graded by its check."""
    task = Task.model_validate(start["eval_task"])
    suite = Suite(name=str(start.get("suite") or "fix"), tasks=[task])
    result = run_task(Variant(GRADER, settings, backend), suite, task, 0, link, graded_by=GRADER)
    return FixedRun(result.run_id, True, result.answer, result.failures)


def _replay_prompt(
    settings: Settings,
    backend: FakeBackend,
    start: dict[str, Any],
    link: dict[str, Any],
    workspace: Path | None,
    yes: bool,
) -> FixedRun:
    """The recorded prompt, replayed in ``workspace`` (a fresh empty folder by default)."""
    with tempfile.TemporaryDirectory(prefix="clawloop-fix-") as tmp:
        folder = workspace if workspace is not None else Path(tmp)
        # A fixed run may become training data: the user's memory stays out of its prompt.
        memory = settings.memory.model_copy(update={"enabled": False})
        settings = settings.model_copy(update={"workspace": folder, "memory": memory})
        # A throwaway folder may be changed freely; the person's own folder asks as usual.
        approver = AutoApprover() if workspace is None else choose_approver(yes)
        toolbox = settings_toolbox(settings, approver)
        loop = build_loop(settings, backend, toolbox)
        extra = {**link, "family": start.get("family")}
        fixed = FixedRun("", False)
        for event in run_traced(settings, loop, Session(), str(start["task"]), extra):
            fixed.run_id = event.run_id or fixed.run_id
            if isinstance(event, FinalEvent):
                fixed.answer = event.content
            elif isinstance(event, ErrorEvent):
                fixed.failures = [f"{event.reason}: {event.message}"]
    if fixed.answer is None and not fixed.failures:
        fixed.failures = ["no final answer"]
    if fixed.run_id:
        path = settings.traces_dir / f"{fixed.run_id}.jsonl"
        verdict = "bad" if fixed.failures else "good"
        grade_trace(path, verdict, by=GRADER, note="; ".join(fixed.failures))
    return fixed
