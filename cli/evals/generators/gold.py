"""Scripted gold runs: each generated task solved by its gold calls through the real loop.

The model is replaced by a scripted backend that makes the gold calls and then gives the gold
answer, so each run goes through the real skills, sandbox, tool selection and trace writer, and
is graded by the task's own check. Every request the loop sent is kept: each becomes a chat
training example holding exactly the messages and tools the model is shown at that step.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agent.messages import AssistantMessage, ChatRequest, ToolCall
from backends.fake import FakeBackend
from cli.config import Settings
from cli.evals.generators.base import Generated
from cli.evals.generators.curriculum import Curriculum
from cli.evals.generators.search import search_gold
from cli.evals.runner import TaskResult, Variant, run_task
from cli.evals.suite import Suite, Task
from skills.simple import ANSWER_TOOL
from skills.simple_command import COMMAND_TOOL


@dataclass(slots=True)
class GoldRun:
    """A gold run's grade and the training examples it yields (one per model step)."""

    result: TaskResult
    examples: list[dict[str, Any]]
    # Each request the loop sent, with the turn the scripted model gave to it.
    steps: list[tuple[ChatRequest, AssistantMessage]] = field(default_factory=list)
    # Solved by search over the offered tools (cli.evals.generators.search), not by its gold
    # calls, which the configuration does not offer; such a run may find no solution.
    searched: bool = False


def gold_turns(gold: Generated) -> list[AssistantMessage]:
    """The assistant turns of the gold solution: each call in turn, then the answer."""
    turns = [
        AssistantMessage(content=None, tool_calls=[ToolCall.make(c.name, c.arguments)])
        for c in gold.calls
    ]
    answer = ToolCall.make(ANSWER_TOOL, {"text": gold.answer})
    return [*turns, AssistantMessage(content=None, tool_calls=[answer])]


def step_examples(steps: Iterable[tuple[ChatRequest, AssistantMessage]]) -> list[dict[str, Any]]:
    """One chat example per step: what the model saw, then the turn it should give.

    Earlier assistant turns carry weight 0 (OpenAI's fine-tuning format), so each turn is
    trained once, in the example of its own step.
    """
    examples = []
    for request, turn in steps:
        messages = [m.to_wire() for m in request.messages]
        for m in messages:
            if m["role"] == "assistant":
                m["weight"] = 0
        example: dict[str, Any] = {"messages": [*messages, turn.to_wire()]}
        if request.tools and request.tool_choice != "none":
            example["tools"] = [t.to_wire() for t in request.tools]
        examples.append(example)
    return examples


def run_example(steps: list[tuple[ChatRequest, AssistantMessage]]) -> list[dict[str, Any]]:
    """A whole run as one example, every turn of it trained, where that is the same data.

    Every request of a run shows the same system prompt and tools and resends the history, so
    each step's example is a prefix of the next one's. Training the last step's example with all
    of the run's own turns weighted (the worked examples before the user's message stay at
    weight 0) teaches the same turns at about half the cost of one example per step. Where a
    step is not a prefix of the next, the steps stay separate examples.
    """
    examples = step_examples(steps)
    if len(examples) < 2 or not _prefixes(examples):
        return examples
    merged = examples[-1]
    messages = merged["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    for m in messages[last_user + 1 :]:
        m.pop("weight", None)
    return [merged]


def _prefixes(examples: list[dict[str, Any]]) -> bool:
    def bare(m: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in m.items() if k != "weight"}

    for shorter, longer in itertools.pairwise(examples):
        a, b = shorter["messages"], longer["messages"]
        if shorter.get("tools") != longer.get("tools") or len(a) > len(b):
            return False
        if any(bare(x) != bare(y) for x, y in zip(a, b, strict=False)):
            return False
    return True


def gold_settings(settings: Settings) -> Settings:
    """The settings a training run uses: the small-model profile, as the user configured it.

    Examples are made in the configuration the adapter will run in: the same system prompt and
    the same tools. With ``[small] command_tool = false`` (the default) the model is never
    offered ``run_command``: families whose solutions are ``run_command`` lines are solved by
    search over the offered tools where command recipes are on (the default), and left out of
    the curriculum where they are not (:func:`cli.evals.generators.curriculum.trainable`).
    """
    return settings.model_copy(update={"profile": "small"})


def without_own_family(settings: Settings, family: str) -> Settings:
    """The settings for a gold run of a ``family`` task: with worked examples chosen per task
    (``[small] shots``), none of its own family is shown.

    The library holds solved tasks of every family, so with its own family's examples shown a
    gold run would teach the model to copy a solved task of the same kind. The tasks it most
    needs to get right are of kinds it has never seen, where the best the library offers is a
    neighbouring kind; training on the neighbours' examples teaches it to adapt those.
    """
    small = settings.small
    if not small.shots or family in small.shot_leave_out:
        return settings
    left = small.model_copy(update={"shot_leave_out": [*small.shot_leave_out, family]})
    return settings.model_copy(update={"small": left})


def run_gold(
    curriculum: Curriculum,
    settings: Settings,
    progress: Callable[[TaskResult], None] | None = None,
) -> Iterator[GoldRun]:
    """Each task's gold run, graded by its check (runs that fail yield no examples)."""
    settings = gold_settings(settings)
    suite = curriculum.suite()
    for task, gold in curriculum.items:
        if _needs_search(gold, settings):
            yield _searched(task, suite, without_own_family(settings, gold.family), progress)
            continue
        turns = gold_turns(gold)
        backend = FakeBackend(turns)
        own = without_own_family(settings, gold.family)
        result = run_task(Variant("gold", own, backend), suite, task, 0)
        if progress is not None:
            progress(result)
        steps = list(zip(backend.requests, turns, strict=False))
        yield GoldRun(result, run_example(steps) if result.passed else [], steps)


def _needs_search(gold: Generated, settings: Settings) -> bool:
    """Whether the gold calls use ``run_command`` where the configuration offers recipes in
    its place."""
    small = settings.small
    uses_command = any(c.name == COMMAND_TOOL for c in gold.calls)
    return uses_command and not small.command_tool and small.recipes


def _searched(
    task: Task,
    suite: Suite,
    settings: Settings,
    progress: Callable[[TaskResult], None] | None,
) -> GoldRun:
    found = search_gold(task, suite, settings)
    if found is None:
        failed = TaskResult(task.id, "search", False, ["no offered tool solved it"], None)
        if progress is not None:
            progress(failed)
        return GoldRun(failed, [], [], searched=True)
    result, backend, turns = found
    if progress is not None:
        progress(result)
    steps = list(zip(backend.requests, turns, strict=True))
    return GoldRun(result, run_example(steps), steps, searched=True)


def example_lines(runs: Iterator[GoldRun]) -> Iterator[str]:
    """The JSONL lines of every passing run's examples."""
    for run in runs:
        for example in run.examples:
            yield json.dumps(example, ensure_ascii=False)  # key order is what the model sees
