"""Gold by search: a task whose gold calls are not offered, solved with the tools that are.

A family whose gold is a ``run_command`` line has no gold run to copy where the configuration
offers command recipes and not ``run_command``. The search tries the tools the request offers
(the selection's own choice, exactly as the model will see it, its best match first), each
with argument values copied from the user's message, and keeps the first run whose check
passes. The answer is the tool's own sentence, never the generator's gold answer, so a call
that found the wrong value fails the check rather than being rescued by the right answer.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

from agent.grounding import COMPOSED_NAMES
from agent.messages import AssistantMessage, ChatRequest, ToolCall, ToolMessage, UserMessage
from agent.tool_selection import STOP_WORDS
from backends.fake import FakeBackend
from cli.config import Settings
from cli.evals.runner import TaskResult, Variant, run_task
from cli.evals.suite import Suite, Task
from skills.simple import ANSWER_TOOL

MAX_RUNS = 24  # runs tried per task before the search gives up
PER_TOOL = 12  # argument assignments tried per offered tool
_TOKEN = re.compile(r"[\w.\-/]+")
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_NUMBER_WORDS |= {"eight": 8, "nine": 9, "ten": 10}
# Words of a request that never fill an argument: function words, and what every task names.
_NOT_VALUES = STOP_WORDS | frozenset(
    [
        "file",
        "files",
        "folder",
        "has",
        "have",
        "how",
        "line",
        "lines",
        "many",
        "put",
        "show",
        "their",
        "them",
        "there",
        "these",
        "word",
        "words",
        "all",
        "every",
        "each",
        "here",
    ]
)

Call = tuple[str, dict[str, Any]]


def candidate_calls(request: ChatRequest) -> list[Call]:
    """The calls worth trying for a request, the likeliest first: each callable tool from the
    last the request shows (the selection's best match) back to the first, with values taken
    from the user's last message."""
    prompt = _last_user_text(request)
    allowed = set(request.allowed_tools) if request.allowed_tools is not None else None
    calls: list[Call] = []
    # Words the tools themselves use ("mention", "contain") are the request's verbs, rarely
    # its values: they are tried last.
    vocab = {
        w
        for spec in request.tools or []
        for w in re.findall(r"[a-z]+", f"{spec.function.name} {spec.function.description}".lower())
    }
    for spec in reversed(request.tools or []):
        name = spec.function.name
        if name == ANSWER_TOOL or (allowed is not None and name not in allowed):
            continue
        calls += itertools.islice(
            _assignments(name, spec.function.parameters, prompt, vocab), PER_TOOL
        )
    return calls


def _last_user_text(request: ChatRequest) -> str:
    users = [m for m in request.messages if isinstance(m, UserMessage)]
    return str(users[-1].content) if users else ""


def _assignments(name: str, schema: dict[str, Any], prompt: str, vocab: set[str]) -> Iterator[Call]:
    props: dict[str, Any] = schema.get("properties") or {}
    required = [p for p in schema.get("required", []) if p in props]
    options = [_values(p, props[p], prompt, vocab) for p in required]
    if any(not o for o in options):
        return
    for values in itertools.product(*options):
        strings = [v for v in values if isinstance(v, str)]
        if len(set(strings)) < len(strings):
            continue  # two arguments given the same word is never what a request means
        yield name, dict(zip(required, values, strict=True))


def _values(name: str, prop: dict[str, Any], prompt: str, vocab: set[str]) -> list[Any]:
    """The values of the user's message that could fill one argument, in the order written."""
    tokens = [t.strip(",;:!?'\"").rstrip(".") for t in _TOKEN.findall(prompt)]
    tokens = [t for t in tokens if t]
    quoted = re.findall(r"['\"]([^'\"]+)['\"]", prompt)
    if "enum" in prop:
        named = [v for v in prop["enum"] if _mentioned(str(v), prompt)]
        return sorted(named, key=lambda v: prompt.find(str(v).rsplit("/", 1)[-1]))
    if prop.get("type") in ("integer", "number"):
        found = [int(t) for t in tokens if t.isdigit()]
        found += [_NUMBER_WORDS[t.lower()] for t in tokens if t.lower() in _NUMBER_WORDS]
        # "the first line", "the largest number": no number written means one
        return _unique(found) or [prop.get("default", 1)]
    if prop.get("type") != "string":
        return []
    if "extension" in str(prop.get("description", "")):
        return _unique(["." + t.rsplit(".", 1)[-1] for t in tokens if re.fullmatch(r"\*?\.\w+", t)])
    named = [t for t in tokens if re.search(r"\w\.\w+$|^\.\w", t)]
    if name in COMPOSED_NAMES:
        return _unique(quoted)  # text the model writes: only what the user quoted
    words = [t for t in tokens if t.lower() not in _NOT_VALUES and t not in named]
    words.sort(key=lambda w: w.lower() in vocab)  # stable: the order written, within each
    if "path" in name or "file" in name or "folder" in name:
        return _unique([*named, *quoted, *words])[:5]
    return _unique([*quoted, *words])[:6]


def _mentioned(value: str, prompt: str) -> bool:
    base = value.rsplit("/", 1)[-1]
    return bool(base) and re.search(rf"(?<![\w.]){re.escape(base)}(?![\w])", prompt) is not None


def _unique(values: list[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def _answer_with_result(request: ChatRequest) -> AssistantMessage:
    """The last tool result as the answer: through the answer tool where it is offered."""
    results = [m for m in request.messages if isinstance(m, ToolMessage)]
    text = str(results[-1].content) if results else ""
    if not any(t.function.name == ANSWER_TOOL for t in request.tools or []):
        return AssistantMessage(content=text)
    return AssistantMessage(content=None, tool_calls=[ToolCall.make(ANSWER_TOOL, {"text": text})])


class _Pick:
    """One search run's model: the ``index``-th candidate call, then the answer with its
    result. It keeps the turns it gave, for the training examples."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.count = 0
        self.turns: list[AssistantMessage] = []

    def call(self, request: ChatRequest) -> AssistantMessage:
        calls = candidate_calls(request)
        self.count = len(calls)
        if self.index >= len(calls):
            return self.answer(request)
        name, arguments = calls[self.index]
        turn = AssistantMessage(content=None, tool_calls=[ToolCall.make(name, arguments)])
        self.turns.append(turn)
        return turn

    def answer(self, request: ChatRequest) -> AssistantMessage:
        turn = _answer_with_result(request)
        self.turns.append(turn)
        return turn


def search_gold(
    task: Task, suite: Suite, settings: Settings
) -> tuple[TaskResult, FakeBackend, list[AssistantMessage]] | None:
    """The first passing run of the candidate calls, with its backend (which kept every
    request) and the turns it gave, or None where no candidate passed."""
    index, count = 0, 1
    while index < min(count, MAX_RUNS):
        pick = _Pick(index)
        backend = FakeBackend([pick.call, pick.answer])
        result = run_task(Variant("search", settings, backend), suite, task, 0)
        count = pick.count
        if result.passed and index < count and len(backend.requests) == len(pick.turns):
            return result, backend, pick.turns
        index += 1
    return None
