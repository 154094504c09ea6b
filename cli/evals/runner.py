"""Runs a suite's tasks through the real loop, skills and sandbox, each in a fresh workspace."""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.backend import Backend
from agent.errors import UserError
from agent.events import ErrorEvent, FinalEvent, StepEvent, ToolCallEvent
from agent.session import Session
from agent.trace import grade_trace
from cli.approvals import AutoApprover
from cli.config import Settings
from cli.evals.checks import failures
from cli.evals.suite import Suite, Task
from cli.wiring import build_loop, run_traced, settings_toolbox

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class TaskResult:
    """One attempt at one task."""

    task: str
    variant: str
    passed: bool
    failures: list[str]
    answer: str | None
    steps: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    run_id: str = ""
    error: str | None = None


@dataclass
class Variant:
    """One arm of a comparison: a name and the settings it runs with."""

    name: str
    settings: Settings
    backend: Backend
    results: list[TaskResult] = field(default_factory=list)


Progress = Callable[[TaskResult], None]


def run_task(
    variant: Variant,
    suite: Suite,
    task: Task,
    attempt: int,
    extra: dict[str, Any] | None = None,
    graded_by: str = "check",
) -> TaskResult:
    """One task in a fresh temporary workspace; the checks decide, and grade its trace.

    The trace records the task itself (prompt, files, check), so a failed run can be replayed
    and graded again later (`agent traces fix`); ``extra`` adds fields to its first line.
    """
    with (
        tempfile.TemporaryDirectory(prefix=f"clawloop-eval-{task.id}-") as tmp,
        tempfile.TemporaryDirectory(prefix="clawloop-eval-memory-") as memory,
    ):
        workspace = Path(tmp)
        for rel, content in task.files.items():
            path = workspace / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
        workspace.chmod(0o755)
        _owned_by_a_user(workspace, variant.settings.sandbox.sandbox_uid)
        # A suite measures the model the same for everyone: memory, where the suite or task
        # turns it on, is a folder of the task's own, never the user's.
        own_memory = variant.settings.memory.model_copy(update={"folder": Path(memory)})
        if suite.memory or task.uses_memory:
            own_memory.enabled = True
            _seed(Path(memory), task.memory)
        updates: dict[str, object] = {"workspace": workspace, "memory": own_memory}
        if task.max_steps is not None:
            updates["max_steps"] = task.max_steps
        settings = variant.settings.model_copy(update=updates)
        # The workspace is thrown away afterwards, so calls that would ask are approved;
        # deny rules still hold, and everything runs inside the OS sandbox.
        toolbox = settings_toolbox(settings, AutoApprover())
        loop = build_loop(settings, variant.backend, toolbox)
        result = TaskResult(task.id, variant.name, False, [], None)
        began = time.monotonic()
        recorded = {
            "suite": suite.name,
            "task_id": task.id,
            "variant": variant.name,
            "attempt": attempt,
            "family": task.family,
            "eval_task": task.model_dump(mode="json", exclude_none=True),
            **(extra or {}),
        }
        before_failures: list[str] = []
        for n, earlier in enumerate(task.before, 1):
            for event in run_traced(settings, loop, Session(), earlier, {**recorded, "before": n}):
                if isinstance(event, ErrorEvent):
                    before_failures.append(f"message {n} before the prompt: {event.message}")
        for event in run_traced(settings, loop, Session(), task.prompt, recorded):
            result.run_id = event.run_id or result.run_id
            if isinstance(event, StepEvent):
                result.steps += 1
                result.prompt_tokens += event.prompt_tokens
                result.completion_tokens += event.completion_tokens
            elif isinstance(event, ToolCallEvent):
                result.tool_calls += 1
            elif isinstance(event, FinalEvent):
                result.answer = event.content
            elif isinstance(event, ErrorEvent):
                result.error = f"{event.reason}: {event.message}"
        result.seconds = time.monotonic() - began
        result.failures = failures(task.check, workspace, result.answer, result.tool_calls)
        result.failures += before_failures
        if result.error and result.answer is None:
            result.failures[:1] = [f"no final answer ({result.error})"]
        result.passed = not result.failures
    if result.run_id:
        trace = settings.traces_dir / f"{result.run_id}.jsonl"
        verdict = "good" if result.passed else "bad"
        grade_trace(trace, verdict, by=graded_by, note="; ".join(result.failures))
    return result


def _seed(folder: Path, files: dict[str, str]) -> None:
    """Write a task's memory files into its memory folder, private as memory's own are."""
    for rel, content in files.items():
        path = folder / rel
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        path.chmod(0o600)


def run_suite(
    suite: Suite,
    variants: list[Variant],
    repeat: int = 1,
    jobs: int = 1,
    progress: Progress | None = None,
) -> None:
    """Every task of ``suite`` ``repeat`` times for each variant; results land on the variants."""
    lock = threading.Lock()

    def one(variant: Variant, task: Task, attempt: int) -> None:
        try:
            result = run_task(variant, suite, task, attempt)
        except UserError:
            raise  # the settings or the model: every task would fail the same way
        except Exception as exc:  # one task's crash is that task's failure, not the suite's end
            _log.exception("eval: task %s crashed", task.id)
            error = f"crashed: {type(exc).__name__}: {exc}"
            result = TaskResult(task.id, variant.name, False, [error], None, error=error)
        with lock:
            variant.results.append(result)
            if progress is not None:
                progress(result)

    work = [(v, t, a) for v in variants for a in range(repeat) for t in suite.tasks]
    if jobs <= 1:
        for item in work:
            one(*item)
        return
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="clawloop-eval") as pool:
        for future in [pool.submit(one, *item) for item in work]:
            future.result()


def _owned_by_a_user(workspace: Path, uid: int) -> None:
    """Run as root, give the task's files to ``uid``, as a person's files are their own.

    Commands then run as the files' owner (see ``sandbox/grant.py``), as they do for everyone
    who is not root; in a workspace of root's they would run as another uid, which may read and
    write the files but not change their mode ("make deploy.sh executable" could never pass).
    """
    if os.geteuid() != 0:
        return
    for folder, dirs, files in os.walk(workspace):
        for name in [*dirs, *files]:
            os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)
    os.chown(workspace, uid, uid)
