"""Worked examples chosen for the task at hand: the solved tasks most like the user's words.

A small model copies the shape of the worked examples it is shown far better than it follows
instructions. A fixed set of examples shows it a few kinds of task; a library of solved tasks,
one or more per kind of everyday work, lets each request show the examples nearest to what the
user asked, so that the call it should make (often a command line to adapt) is right there.

The library is a JSONL file, one solved task a line::

    {"family": "count-word", "prompt": "How often ...", "messages": [{"role": "user", ...}]}

``messages`` are the solved run's turns as sessions store them: the user's message, each call
and its result, and the final answer. Similarity is lexical (TF-IDF over words and word pairs,
with file names reduced to their extension and numbers to one token), so choosing is fast and
deterministic: the same user message always gets the same examples, which keeps every request
of a run, and so the model's cached prefix, the same.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from agent.messages import AssistantMessage, Message, UserMessage, parse_message

BUNDLED_LIBRARY = "shots.jsonl"

_WORD = re.compile(r"[a-z0-9_][a-z0-9_.\-/]*")
_FILE = re.compile(r"^[\w.\-/]*\.([a-z0-9]{1,5})$")
# Words that carry no kind of task (question words and "how many" do, so they stay).
_STOP = frozenset(
    {
        *("a", "an", "the", "of", "to", "in", "on", "at", "for", "and", "or", "is", "are"),
        *("be", "it", "its", "this", "that", "these", "those", "me", "my", "i", "you"),
        *("your", "please", "can", "could", "would", "will", "just", "with", "from", "by"),
        *("as", "do", "does"),
    }
)


def features(text: str) -> list[str]:
    """The words of ``text`` as similarity features: words, then pairs of neighbours."""
    words: list[str] = []
    for raw in _WORD.findall(text.lower()):
        word = raw.strip(".-/")
        if not word or word in _STOP:
            continue
        named = _FILE.match(word)
        if named and not word.replace(".", "").isdigit():
            words.append(f"<{named.group(1)}>")
        elif re.fullmatch(r"[\d.,]+", word):
            words.append("<n>")
        else:
            words.append(word)
    return words + [f"{a} {b}" for a, b in itertools.pairwise(words)]


@dataclass(slots=True, frozen=True)
class Shot:
    """One solved task of the library."""

    family: str
    prompt: str
    messages: tuple[Message, ...]

    @property
    def tools(self) -> frozenset[str]:
        """The tools its calls use."""
        return frozenset(
            call.function.name
            for m in self.messages
            if isinstance(m, AssistantMessage)
            for call in m.tool_calls or []
        )


@dataclass(slots=True)
class ShotLibrary:
    """Solved tasks, and the choice of those nearest to a user's message."""

    shots: list[Shot]
    _vectors: list[dict[str, float]] = field(default_factory=list, repr=False)
    _idf: dict[str, float] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        counts = [Counter(features(s.prompt)) for s in self.shots]
        documents = Counter(term for c in counts for term in c)
        total = len(self.shots)
        self._idf = {t: math.log((1 + total) / (1 + n)) + 1.0 for t, n in documents.items()}
        self._vectors = [self._vector(c) for c in counts]

    def _vector(self, counts: Counter[str]) -> dict[str, float]:
        weights = {t: (1 + math.log(n)) * self._idf.get(t, 0.0) for t, n in counts.items()}
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        return {t: w / norm for t, w in weights.items() if w}

    def nearest(
        self,
        text: str,
        k: int,
        tools: Iterable[str] | None = None,
        leave_out: Iterable[str] = (),
    ) -> list[Shot]:
        """The ``k`` shots most like ``text``, one per family, least alike first.

        Only shots whose calls all use ``tools`` (when given) are chosen, so an example never
        shows a tool the model cannot call, and none of a family in ``leave_out``. The nearest
        comes last, next to the user's message.
        """
        if k <= 0 or not self.shots:
            return []
        allowed = None if tools is None else frozenset(tools)
        left = frozenset(leave_out)
        query = self._vector(Counter(features(text)))
        scored = sorted(
            (
                (sum(w * vector.get(t, 0.0) for t, w in query.items()), -i, shot)
                for i, (shot, vector) in enumerate(zip(self.shots, self._vectors, strict=True))
                if (allowed is None or shot.tools <= allowed) and shot.family not in left
            ),
            key=lambda item: (item[0], item[1]),
            reverse=True,
        )
        chosen: list[Shot] = []
        families: set[str] = set()
        for score, _, shot in scored:
            if score <= 0:
                break  # nothing in common: no example is better than an unrelated one
            if shot.family in families:
                continue
            chosen.append(shot)
            families.add(shot.family)
            if len(chosen) == k:
                break
        return list(reversed(chosen))


def parse_library(lines: Iterable[str], source: str = "library") -> ShotLibrary:
    """A library from its JSONL lines (a malformed line is its author's bug, named by line)."""
    shots: list[Shot] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            messages = [parse_message(m) for m in record["messages"]]
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{source}: line {n} is not a worked example: {e}") from e
        shots.append(Shot(str(record["family"]), str(record["prompt"]), tuple(messages)))
    return ShotLibrary(shots)


def load_library(path: str | None = None) -> ShotLibrary:
    """The bundled library (``agent/prompts/shots.jsonl``) or the one at ``path``."""
    if path:
        file = Path(path).expanduser()
        return parse_library(file.read_text(encoding="utf-8").splitlines(), str(file))
    bundled = resources.files("agent").joinpath("prompts", BUNDLED_LIBRARY)
    return parse_library(bundled.read_text(encoding="utf-8").splitlines(), BUNDLED_LIBRARY)


@dataclass(slots=True)
class ShotPicker:
    """The examples a request shows: the library's nearest to the latest user message."""

    library: ShotLibrary
    k: int
    # Shown when no solved task has a word in common with the message (the prompt's own).
    fallback: Sequence[Message] = ()
    # Tools the model is never offered in this configuration; no chosen example uses them.
    exclude: frozenset[str] = frozenset()
    # Families never shown. Training examples leave out the task's own family, so that the
    # model learns to adapt a neighbouring kind of task rather than to recall its own.
    leave_out: frozenset[str] = frozenset()

    def __call__(self, messages: Sequence[Message], tools: Iterable[str]) -> list[Message]:
        tools = [t for t in tools if t not in self.exclude]
        text = next(
            (m.content for m in reversed(messages) if isinstance(m, UserMessage)),
            "",
        )
        query = text if isinstance(text, str) else ""
        chosen = self.library.nearest(query, self.k, tools, self.leave_out)
        if not chosen:
            return list(self.fallback)
        return [m for shot in chosen for m in shot.messages]
