"""Rejection sampling: a model attempts tasks, the checks grade, passing runs stay.

The model is the embedded one (self-play) or a stronger one behind any backend (a teacher,
for distillation); either is sent exactly the requests the embedded model would be sent.

Each task is tried up to ``tries`` times at a temperature through the real loop, skills and
sandbox; the first run that passes its check is kept. The backend is wrapped so that every
request and the model's reply to it are recorded, and each step of a kept run becomes a chat
example of exactly what the model saw and said. Steps that did not help are left out: a reply
that could not be parsed, one cut at the token limit, and a call whose result was an error (the
run may still have passed after the loop told the model so).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agent.backend import Backend, BackendEvent, Completion
from agent.messages import AssistantMessage, ChatRequest, ToolMessage
from cli.config import Settings
from cli.evals.generators.curriculum import Curriculum
from cli.evals.generators.gold import gold_settings, step_examples
from cli.evals.runner import TaskResult, Variant, run_task
from cli.evals.suite import Suite, Task


class RecordingBackend:
    """A backend that passes requests on and keeps each request with the reply it got."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name
        self.steps: list[tuple[ChatRequest, Completion]] = []

    def generate(self, request: ChatRequest) -> Iterator[BackendEvent]:
        completion: Completion | None = None
        for event in self.inner.generate(request):
            if isinstance(event, Completion):
                completion = event
            yield event
        if completion is not None:
            self.steps.append((request, completion))

    def __getattr__(self, name: str) -> Any:  # close(), capabilities and the like
        return getattr(self.inner, name)


def _failed_calls(steps: list[tuple[ChatRequest, Completion]]) -> set[str]:
    """Ids of the tool calls whose result, as the next request showed it, was an error."""
    failed: set[str] = set()
    for request, _ in steps:
        for message in request.messages:
            if isinstance(message, ToolMessage) and str(message.content).startswith("error:"):
                failed.add(message.tool_call_id)
    return failed


def useful_steps(
    steps: list[tuple[ChatRequest, Completion]],
) -> list[tuple[ChatRequest, AssistantMessage]]:
    """The steps worth training on: parsed, not cut off, and no call of theirs failed."""
    failed = _failed_calls(steps)
    kept = []
    for request, completion in steps:
        message = completion.message
        if completion.parse_error or completion.finish_reason == "length":
            continue
        if not message.tool_calls and not (message.content or "").strip():
            continue
        if any(call.id in failed for call in message.tool_calls or []):
            continue
        kept.append((request, message))
    return kept


@dataclass(slots=True)
class SampledTask:
    """How a task's tries went, and the examples of the run that was kept (if any passed)."""

    task: str
    family: str
    tries: list[TaskResult] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.examples)


def sample_task(
    settings: Settings, backend: Backend, suite: Suite, task: Task, tries: int
) -> SampledTask:
    """Up to ``tries`` runs of ``task``; the first passing one's useful steps become examples."""
    outcome = SampledTask(task.id, task.family or suite.name)
    for attempt in range(tries):
        recorder = RecordingBackend(backend)
        result = run_task(Variant(suite.name, settings, recorder), suite, task, attempt)
        outcome.tries.append(result)
        if result.passed:
            outcome.examples = step_examples(useful_steps(recorder.steps))
            if outcome.examples:
                break
    return outcome


def sample(
    tasks: Curriculum | Suite,
    settings: Settings,
    backend: Backend,
    tries: int = 2,
    jobs: int = 1,
    progress: Callable[[SampledTask], None] | None = None,
) -> list[SampledTask]:
    """Every task sampled with ``backend`` (``jobs`` tasks at once) in the small-model profile.

    The backend may be the model itself (self-play) or a stronger one (a teacher): either way
    it is sent the requests the embedded model would be sent, so what passes can be trained on.
    """
    suite = tasks.suite("self-play") if isinstance(tasks, Curriculum) else tasks
    settings = gold_settings(settings)
    lock = threading.Lock()
    done: list[SampledTask] = []

    def one(task: Task) -> SampledTask:
        outcome = sample_task(settings, backend, suite, task, tries)
        with lock:
            done.append(outcome)
            if progress is not None:
                progress(outcome)
        return outcome

    if jobs <= 1:
        return [one(task) for task in suite.tasks]
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="clawloop-sample") as pool:
        return list(pool.map(one, suite.tasks))
