"""Where a call's argument came from: the user's words, a trusted result, or only untrusted text.

The data-flow gate (sandbox/flow.py) asks this of every checked argument of a consequential
call once untrusted content is in the conversation. The answer is found by looking for the
value in the conversation, with the labels the loop put beside each tool result
(agent/provenance.py); the model's own turns are never evidence, since an injection may have
written them.

Three levels of need, for three kinds of argument:

- ``user``: the value must appear in the user's own words (a file to delete or overwrite);
- ``trusted``: in the user's words or a trusted result (a recipient found in a contacts file);
- ``words``: free text (a command line): no word of it may appear only in untrusted text.
  Words found nowhere are the model's own composition and pass.

A trusted result does not vouch for a value the model itself wrote into an earlier call after
untrusted content arrived: otherwise writing a stranger's address to a file and reading it
back would launder it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from agent.messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from agent.provenance import Provenance

Need = Literal["user", "trusted", "words"]

_WORD = re.compile(r"[^\s'\"`;|&<>(){}\[\],]+")
_EDGE = ".:!?*="


@dataclass(slots=True, frozen=True)
class Finding:
    """One argument that does not come from the user or a trusted source."""

    argument: str
    value: str
    need: Need
    source: Provenance | None  # the untrusted message it appears in; None: found nowhere

    def explain(self) -> str:
        """For the owner: "the to `x@evil.example` appears only in a mail from y@z"."""
        shown = self.value if len(self.value) <= 80 else self.value[:77] + "..."
        if self.source is not None:
            where = f"appears only in {self.source.describe()}"
            if self.need == "user":
                where += ", not in the user's own words"
        elif self.need == "user":
            where = "is not in the user's own words"
        else:
            where = "appears in none of the user's words or trusted results"
        return f"the {self.argument} `{shown}` {where}"


@dataclass(slots=True)
class _Trusted:
    text: str
    words: set[str]
    echoed: str  # what the model had written into calls before this result came back
    echoed_words: set[str]


@dataclass(slots=True)
class Evidence:
    """The conversation sorted by who wrote it, ready to look values up in."""

    user: list[str] = field(default_factory=list)
    trusted: list[_Trusted] = field(default_factory=list)
    untrusted: list[tuple[str, Provenance]] = field(default_factory=list)

    @classmethod
    def of(cls, messages: Iterable[Message]) -> Evidence:
        found = cls()
        echoed: list[str] = []
        for message in messages:
            if isinstance(message, UserMessage) and message.provenance is not None:
                if message.from_owner:
                    found.user.append(message.content.lower())
                else:  # a chat member's words: untrusted, like a mail's
                    found.untrusted.append((message.content.lower(), message.provenance))
            elif isinstance(message, UserMessage):
                found.user.append(message.content.lower())
            elif isinstance(message, SystemMessage):
                found.add_trusted(message.content, "")
            elif isinstance(message, AssistantMessage):
                if found.untrusted:
                    echoed += [c.function.arguments.lower() for c in message.tool_calls or []]
            elif isinstance(message, ToolMessage):
                text = message.content.lower()
                label = message.provenance
                if label is not None and not label.trusted:
                    found.untrusted.append((text, label))
                else:
                    found.add_trusted(text, "\n".join(echoed))
        return found

    def add_trusted(self, text: str, echoed: str) -> None:
        text = text.lower()
        self.trusted.append(_Trusted(text, words(text), echoed, words(echoed)))

    @property
    def tainted(self) -> bool:
        """Whether untrusted content has entered the conversation."""
        return bool(self.untrusted)

    def check(self, argument: str, value: str, need: Need) -> Finding | None:
        """None if ``value`` comes from where ``need`` asks, else what is wrong with it."""
        if need == "words":
            return self._check_words(argument, value)
        wanted = _normal(value)
        if not wanted:
            return None
        if any(wanted in text for text in self.user):
            return None
        if need == "trusted" and any(
            wanted in t.text and wanted not in t.echoed for t in self.trusted
        ):
            return None
        return Finding(argument, value, need, self._untrusted_source(wanted))

    def _check_words(self, argument: str, value: str) -> Finding | None:
        user_words = set().union(*(words(text) for text in self.user)) if self.user else set()
        for word in sorted(words(value.lower())):
            if word in user_words:
                continue
            if any(word in t.words and word not in t.echoed_words for t in self.trusted):
                continue
            for text, label in self.untrusted:
                if word in words(text):
                    return Finding(argument, word, "words", label)
        return None

    def _untrusted_source(self, wanted: str) -> Provenance | None:
        for text, label in self.untrusted:
            if wanted in text:
                return label
        return None


def words(text: str) -> set[str]:
    """The words of a text as the words check compares them: split at spaces, quotes and shell
    operators, trailing punctuation dropped, one-letter words ignored."""
    found = (w.strip(_EDGE) for w in _WORD.findall(text))
    return {w for w in found if len(w) > 1}


def values(arguments: dict[str, Any], name: str) -> Iterator[tuple[str, str]]:
    """``(argument, text)`` for every string in ``arguments[name]`` (``*``: every argument),
    lists and objects walked."""
    chosen = arguments.items() if name == "*" else [(name, arguments.get(name))]
    for key, value in chosen:
        yield from ((key, text) for text in _strings(value))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def _normal(value: str) -> str:
    text = value.strip().lower()
    return text[2:] if text.startswith("./") else text
