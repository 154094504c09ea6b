"""Tool retrieval: offer a small model only the few tools whose words match the task.

A 135M model choosing among sixteen tools picks badly; choosing among three it mostly picks
right. Before each request, :class:`LexicalToolSelector` scores every tool's name and
description against the user's latest message (words weighted by how rare they are among the
tools, so "file" counts for little and "lines" for much) and keeps the best ``k``. Tools named
in ``general`` (a tool that composes a command, for whatever no narrow tool does) are offered
beside them whenever any tool matches, or the message names a file or folder that a tool's
arguments offer (an ``enum`` of the workspace's files): a question about a named file is work
for tools even when its words ("largest", "average") are in no tool's description. Tools named
in ``always`` (the answer tool) are offered too; when no tool matches any word of the message (a
greeting, a general question), only they are. With ``look_first``, a message that
does match a tool may not call an ``always`` tool in the first reply: the model looks before it
answers. That tool is still shown (only the grammar holds it back), so every step of a task
renders the same tool list and the prompt keeps its cached prefix from step to step.
Tools named in ``cued`` are offered when, and only when, the message holds one of their cue
phrases (or their cue, a function of the message, says yes): a tool whose description shares
everyday words with chat ("today", "help") would otherwise be called for a "thanks, that is all
for today". A cued tool named in ``alone`` is, when its cue holds, the only tool offered
(beside ``always``): a cue precise enough to say what the message is about ("what is my cat
called?" asks memory) should not leave the model a file tool to pick by mistake.
Tools named in ``secondary`` (command recipes: many, with long descriptions, beside the narrow
tools a small model was trained on) never change how the other tools score: a word's rarity is
counted among the others (and the one secondary tool scored). Their names are precise, so a
word of a secondary tool's name weighs half again as much as a word of its description ("the
first 3 lines" is ``first_lines``, not ``reverse_lines``, whose description says "last line
first"). One is offered (at most ``secondary_slots``) only where ``secondary_weight`` of its
score still matches at least as well as the best other tool: below the two thirds at which a
recipe named like a narrow tool (``count_lines_with`` beside ``count_lines``) would tie with it.
With ``covering``, one also comes where it holds every word of the message that the best other
tool holds, and more: "make deploy.sh executable" is ``make_executable``, which holds "make"
and "executable", where ``make_folder`` holds only "make". Once offered, it is judged by its
whole score like any tool, so the tools that match less than ``relative`` as well drop out
("what is the character count of memo.md" is ``count_characters`` alone). With ``beside``,
the admitted ones come beside the best ``k`` narrow tools rather than among them.
With ``steps``, a request of several steps (split at "then", "and", ";" and sentence ends)
keeps, beside the best ``k``, the tool that best matches each step's own words, file and
folder names left out: "copy movies.txt as list.txt; in list.txt, replace dragon by mirror"
keeps ``copy_file`` for its first step where the whole request ranks it below the best
``k`` (a step's tool must still score at least ``relative`` of the best, like any tool).
Among tools that score the same, the one taking as many workspace files (``enum`` arguments) as
the message names comes first: "add up the numbers in a.txt and b.txt" is
``sum_numbers_in_both``, not ``sum_numbers``. The tools are shown in the order of their scores,
the best match last, nearest the message: a small model leans to the tool it read last. A cued
tool that stands alone keeps the toolbox's order (``answer`` before ``recall``), the arrangement
the memory turns were trained and measured in.
The loop still validates every call against the whole toolbox.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agent.messages import Message, ToolSpec

_WORD = re.compile(r"[a-z0-9]+")
STOP_WORDS = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "could",
        "do",
        "does",
        "for",
        "from",
        "give",
        "i",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "please",
        "should",
        "tell",
        "that",
        "the",
        "then",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "you",
        "your",
    )
)
NAME_BONUS = 1.5  # how much more a word of the tool's name weighs than a description word
_STEM = 5  # letters two words must share to count as one (contains / containing)


def _letter(word: str) -> bool:
    return len(word) == 1 and word.isalpha()


def words(text: str) -> list[str]:
    """Lower-cased words of ``text`` (plural s dropped), without common function words."""
    # A lone letter is the tail of a contraction or a possessive ("what's", "workspace's"),
    # not a word of the request.
    found = [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS and not _letter(w)]
    return [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in found]


def _same(a: str, b: str) -> bool:
    """One word for retrieval: equal, a prefix of four letters or more (sort / sorted), or
    sharing the first five letters (configured / config, mentioned / mention)."""
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    if long.startswith(short) and len(short) >= 4:
        return True
    return len(short) >= _STEM and long[:_STEM] == short[:_STEM]


class ToolSelector(Protocol):
    """Picks, before each request, the tools to show and those the model may call."""

    def choose(
        self, messages: Sequence[Message], specs: list[ToolSpec]
    ) -> tuple[list[ToolSpec], list[str] | None]: ...


@dataclass(slots=True)
class LexicalToolSelector:
    """Keeps the ``k`` tools that best match the latest user message, plus ``always``."""

    k: int = 3
    always: Sequence[str] = ()
    general: Sequence[str] = ()
    never: Sequence[str] = ()  # tools switched off for this model
    # tool -> its cue phrases, or a function of the message that says whether it cues the tool
    cued: Mapping[str, Sequence[str] | Callable[[str], bool]] = field(default_factory=dict)
    alone: Sequence[str] = ()  # cued tools offered without the others when their cue holds
    relative: float = 0.5  # a tool must score at least this share of the best tool's score
    # tools that rank behind the others unless they match clearly better (command recipes:
    # many, with long descriptions, beside the narrow tools the model was trained on)
    secondary: Collection[str] = ()
    secondary_weight: float = 0.6
    secondary_slots: int = 1  # of the ``k``, at most this many go to secondary tools
    covering: bool = True  # a secondary tool holding the best tool's words and more comes too
    beside: bool = False  # admitted secondary tools come beside the best ``k``, not among them
    steps: bool = False  # each step of a request of several keeps its best tool, past ``k``
    look_first: bool = False

    def __call__(self, messages: Sequence[Message], specs: list[ToolSpec]) -> list[ToolSpec]:
        """The tools the model may call now."""
        shown, allowed = self.choose(messages, specs)
        return shown if allowed is None else [s for s in shown if s.function.name in allowed]

    def choose(
        self, messages: Sequence[Message], specs: list[ToolSpec]
    ) -> tuple[list[ToolSpec], list[str] | None]:
        """The tools to show, and the names among them the model may call (None: all)."""
        query = next((m.content for m in reversed(messages) if m.role == "user"), None)
        if not isinstance(query, str):
            return [s for s in specs if s.function.name not in self.never], None
        terms = set(words(query))
        specs = [
            s
            for s in specs
            if s.function.name not in self.never
            and (s.function.name not in self.cued or _cued(self.cued[s.function.name], query))
        ]
        docs = {s.function.name: set(words(_document(s))) for s in specs}
        # Secondary tools never change how the others score: rarity counts among the others.
        # (A secondary tool counts as one more tool, among which it holds its own words.)
        held = {name: {t for t in terms if _holds(doc, t)} for name, doc in docs.items()}
        primary = [name for name in docs if name not in self.secondary]
        found = {t: sum(1 for name in primary if t in held[name]) for t in terms}

        def score(name: str, mine: set[str]) -> float:
            if name in self.secondary:
                return _score(mine, found, len(primary), set(words(name.replace("_", " "))), 1)
            return _score(mine, found, len(primary), set(), 0)

        scores = {name: score(name, mine) for name, mine in held.items()}
        fixed = {*self.always, *self.general}
        others = [n for n in scores if n not in fixed and n not in self.secondary]
        leader = max(others, key=lambda n: scores[n], default=None)  # the best other tool
        best = scores[leader] if leader is not None else 0.0
        # A secondary tool comes only where its weighted score matches at least as well as the
        # best other tool; once it comes, it is judged by its whole score like the others.
        # Where no other tool matches and the message names nothing of the workspace (a
        # question for the model itself, "what is the largest planet?"), one shared word does
        # not make a task for a recipe.
        by_name = {s.function.name: s for s in specs}
        named_values = _named_choices(query, specs)
        named = len(named_values) if self.secondary else 0  # files named, for recipes' ties
        grounded = best > 0 or named > 0
        # ... or where it holds every word the best other tool holds, and more ("make
        # deploy.sh executable": ``make_folder`` holds "make", ``make_executable`` both).
        led = held[leader] if leader is not None else set()
        admitted = sorted(
            (
                n
                for n in self.secondary
                if grounded
                and scores.get(n, 0) > 0
                and (scores[n] * self.secondary_weight >= best or (self.covering and led < held[n]))
            ),
            key=lambda n: (-scores[n], _misfit(by_name[n], named)),
        )[: self.secondary_slots]
        best = max([best, *(scores[n] for n in admitted)])
        ranked = sorted(
            (
                s
                for s in specs
                if s.function.name not in fixed
                and (s.function.name not in self.secondary or s.function.name in admitted)
                and scores[s.function.name] > 0
                and scores[s.function.name] >= self.relative * best
            ),
            key=lambda s: (-scores[s.function.name], _misfit(s, named)),
        )
        if self.beside:
            # Recipes come beside the narrow tools' ``k``: none takes a narrow tool's place.
            narrow = [s.function.name for s in ranked if s.function.name not in self.secondary]
            keep = {
                *narrow[: self.k],
                *(s.function.name for s in ranked if s.function.name in admitted),
            }
        else:
            keep = {s.function.name for s in ranked[: self.k]}
        if self.steps:
            # "copy a.txt as b.txt; in b.txt, replace x by y": the best tool of each step stays.
            eligible = [s.function.name for s in ranked]
            for step in _steps(query):
                mine = {n: held[n] & step for n in eligible}
                top = max(eligible, key=lambda n: score(n, mine[n]), default=None)
                if top is not None and mine[top]:
                    keep.add(top)
        cued = {s.function.name for s in specs if s.function.name in self.cued}  # cue matched
        alone = cued & set(self.alone)
        if alone:
            keep = alone
        else:
            keep |= cued
            if keep or named_values or any(scores.get(n, 0) > 0 for n in self.general):
                keep |= {name for name in self.general if name in scores}
        first_reply = bool(messages) and messages[-1].role == "user"
        shown = [s for s in specs if s.function.name in keep | set(self.always)]
        if not alone:
            # The best match is shown last, nearest the message (a small model leans to the tool
            # it read last); tools that were not ranked (cued, general) first, ``always`` after
            # all. A cue that stands alone keeps the toolbox's order, the answer tool first.
            rank = {s.function.name: i for i, s in enumerate(ranked)}
            shown.sort(
                key=lambda s: (
                    s.function.name in self.always,
                    -rank.get(s.function.name, len(rank)),
                )
            )
        if self.look_first and first_reply and keep:
            return shown, [s.function.name for s in shown if s.function.name in keep]
        return shown, None


_STEP_BREAK = re.compile(r";|[.!?](?=\s|$)|\b(?:and|then)\b")
_FILE_NAME = re.compile(r"[\w./-]*\w\.\w(?:[\w./-]*\w)?|[\w./-]+/")


def _steps(query: str) -> list[set[str]]:
    """The words of each step of a request that asks for several ("..., then ...", "... and
    ...", "...; ..."), file and folder names left out; empty for a request of one step.

    A name is what the step works on, not what it does: in "copy movies.txt as list.txt" the
    step is a copy, not a listing.
    """
    parts = _STEP_BREAK.split(_FILE_NAME.sub(" ", query.lower()))
    found = [set(words(part)) for part in parts]
    found = [step for step in found if step]
    return found if len(found) > 1 else []


def _cued(cue: Sequence[str] | Callable[[str], bool], query: str) -> bool:
    if callable(cue):
        return cue(query)
    lowered = query.lower()
    return any(phrase in lowered for phrase in cue)


def _named_choices(query: str, specs: list[ToolSpec]) -> set[str]:
    """The values the tools' arguments are limited to (``enum``: the workspace's files and
    folders) that the message names."""
    text = query.lower()
    # Every tool offers the same workspace list: each value is looked for once.
    values = {str(v).lower().rstrip("/") for spec in specs for vs in _choices(spec) for v in vs}
    return {name for name in values if len(name) > 2 and _names(name, text)}


def _names(name: str, text: str) -> bool:
    """Whether ``text`` holds ``name`` as a whole file or folder name (a sentence's full stop
    may follow it; ``a.txt.bak`` is another file)."""
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)", text) is not None


def _choices(spec: ToolSpec) -> list[Sequence[object]]:
    """The ``enum`` of each of the tool's arguments that has one."""
    properties = (spec.function.parameters or {}).get("properties", {})
    return [p["enum"] for p in properties.values() if isinstance(p, dict) and p.get("enum")]


def _misfit(spec: ToolSpec, named: int) -> int:
    """How far the tool's count of workspace arguments is from the count the message names
    (two files named: ``sum_numbers_in_both`` before ``sum_numbers``); 0 when none is named."""
    return abs(len(_choices(spec)) - named) if named else 0


def _document(spec: ToolSpec) -> str:
    return f"{spec.function.name.replace('_', ' ')} {spec.function.description or ''}"


def _holds(doc: set[str], term: str) -> bool:
    return any(_same(term, w) for w in doc)


def _score(held: set[str], found: Mapping[str, int], n: int, name: set[str], more: int) -> float:
    """Each word the tool holds (``held``) weighed by its rarity among ``n`` tools (``found[t]``
    of them hold it; ``more`` is added to both for a tool outside them); a word of ``name``
    counts half again."""
    total = 0.0
    for term in held:
        weight = NAME_BONUS if _holds(name, term) else 1.0
        total += weight * math.log(1 + (n + more) / (found[term] + more))
    return total
