"""Is a call built from what the conversation says, or from values the model made up?

A small model that is made to call a tool fills the arguments with something, and when nothing
in the conversation fits, it invents: a bus from "New York, NY" to "Los Angeles, CA" on
"2022-01-01" for someone who only said they were bored. A call whose short values (names,
places, dates, numbers, file names) appear nowhere in what the user, the system prompt or the
tools said is such a guess. What the model writes is not checked: strings of more than
``COMPOSED_WORDS`` words, and arguments named in ``COMPOSED_NAMES`` (a file's new text, a
replacement, a command line); nor are booleans, or values the tool's schema lists (``enum``) or
gives as its ``default``.

A value is found when it appears in the conversation as written (case aside), or when one of
its words does (a word and its plural count as one); a number when the conversation has it in
digits (``1e-9`` and ``1e-09`` alike; "8.5 million" is also 8500000) or as a number word
("three", "twice"), or as a percentage of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from agent.messages import Message, ToolCall
from agent.tools import Tool

# Who decided a call was not run (the ``decided_by`` of its observation).
GROUNDING = "grounding"

# Strings of more words than this are composed text, not a value to look up.
COMPOSED_WORDS = 3
# Arguments named like this hold what the model writes (a file's new text, a replacement, a
# command line), which may rightly be a word nobody said: "print" for a typo "pirnt".
COMPOSED_NAMES = frozenset({"content", "new", "line", "command", "body", "code"})

_WORD = re.compile(r"[^\W_]+")  # letters and digits: my_name is two words
# digits, with thousands' commas, decimals and an exponent (1e-9), and a scale word after them
_NUMBER = re.compile(
    r"(\d+(?:,\d{3})*(?:\.\d+)?(?:e[-+]?\d+)?)(?:\s+(thousand|million|billion|trillion)\b)?"
)
_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
    "thirty": 30, "fifty": 50, "hundred": 100, "thousand": 1000, "first": 1, "second": 2,
    "third": 3, "fourth": 4, "fifth": 5, "once": 1, "twice": 2, "single": 1, "double": 2,
    "half": 0.5, "a": 1, "an": 1,
}  # fmt: skip


class Grounds:
    """What the conversation says, ready to look values up in."""

    def __init__(self, text: str) -> None:
        self.text = text.lower()
        self.words = set(_WORD.findall(self.text))
        self.numbers: set[float] = set()
        for digits, scale in _NUMBER.findall(self.text):
            number = float(digits.replace(",", ""))
            # "8.5 million" is both 8.5 and 8500000: a tool may take either.
            self.numbers |= {number, number * _SCALES[scale]} if scale else {number}
        self.numbers |= {float(v) for w, v in _NUMBER_WORDS.items() if w in self.words}

    @classmethod
    def of(cls, messages: Sequence[Message]) -> Grounds:
        """The text of the system prompt, the user's messages and the tools' results (the
        model's own words and calls are not evidence for its calls)."""
        return cls(
            "\n".join(
                m.content
                for m in messages
                if m.role in ("system", "user", "tool") and isinstance(m.content, str)
            )
        )

    def has_number(self, value: float) -> bool:
        return any(abs(value) * k in self.numbers for k in (1, 100))

    def has_text(self, value: str) -> bool:
        low = value.strip().lower()
        if not low or low in self.text:
            return True
        words = _WORD.findall(low)
        return not words or any(self._has_word(w) for w in words)

    def _has_word(self, word: str) -> bool:
        return (
            word in self.words or f"{word}s" in self.words or word.removesuffix("s") in self.words
        )


def guessed(call: ToolCall, tool: Tool | None, messages: Sequence[Message]) -> list[str]:
    """The values of ``call`` that ``messages`` never gave (empty for a call that validation
    will refuse anyway: an unknown tool, arguments that are not a JSON object)."""
    try:
        args = call.function.parsed_arguments()
    except ValueError:
        return []
    if tool is None or not isinstance(args, dict):
        return []
    return made_up(args, tool.parameters, Grounds.of(messages))


def refusal(missing: Sequence[str], answer_tool: str) -> str:
    """The observation for a call that was not run, written for the model."""
    return (
        f"error: not run, because nothing in this conversation gave {', '.join(missing)}. "
        f"Do not guess values: call {answer_tool} to reply, and ask for what is missing."
    )


def made_up(
    arguments: dict[str, Any], schema: dict[str, Any] | None, grounds: Grounds
) -> list[str]:
    """The values of ``arguments`` found nowhere in ``grounds``, as ``name=value`` (empty when
    every checked value is found)."""
    missing: list[str] = []
    for where, value, spec in _leaves(arguments, schema or {}, ""):
        if isinstance(value, bool) or value is None:
            continue
        if value in spec.get("enum", ()) or ("default" in spec and value == spec["default"]):
            continue
        if isinstance(value, int | float):
            found = grounds.has_number(float(value))
        elif isinstance(value, str):
            composed = where.rsplit(".", 1)[-1] in COMPOSED_NAMES
            found = composed or len(value.split()) > COMPOSED_WORDS or grounds.has_text(value)
        else:
            continue
        if not found:
            missing.append(f"{where}={value!r}")
    return missing


def _leaves(value: Any, schema: Any, where: str) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    spec = schema if isinstance(schema, dict) else {}
    if isinstance(value, dict):
        properties = spec.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        for key, item in value.items():
            yield from _leaves(item, properties.get(key), f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item, spec.get("items"), f"{where}[]")
    else:
        yield where, value, spec
