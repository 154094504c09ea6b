"""Summaries of compacted turns: extractive (any model) or written by the model itself.

The extractive summary needs no model, so it works with the bundled 135M one, whose own
summaries lose facts. It keeps, one line each, the user's words, the calls made with the first
line of their results, and the answers; then the files and names the turns mentioned. When a
summary grows past its size, lines are dropped from the middle: the oldest lines (where a user
tends to say who they are and what they want) and the newest stay.

Untrusted content (a mail, a web page, an MCP result) never enters a summary: the summary is
sent inside the system prompt, and a stranger's words must not be promoted there. Its place is
taken by a note naming the source, and the compaction record lists those sources.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from agent.messages import AssistantMessage, Message, ToolMessage, UserMessage

NAMES_PREFIX = "Files and names mentioned: "
_DROPPED = "- (earlier lines dropped to keep the summary short)"
# A file or folder name (with an extension or a slash), or a quoted identifier.
_NAME = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.[A-Za-z0-9]{1,6}|(?:[\w.-]+/)+[\w.-]*)")
_QUOTED = re.compile(r"[\"'`]([^\"'`\s]{2,60})[\"'`]")
_NUMBER = re.compile(r"[\d.,]+")
MAX_NAMES = 40


def one_line(text: str, limit: int) -> str:
    """``text`` as a single line of at most ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


def shown_result(message: ToolMessage) -> str:
    """A result's first line, or a note for an untrusted one (whose words are not kept)."""
    label = message.provenance
    if label is not None and not label.trusted:
        return f"({label.describe()}: untrusted, not kept)"
    first = next((line for line in message.content.splitlines() if line.strip()), "")
    return one_line(first, 120) or "(empty)"


def untrusted_sources(messages: Iterable[Message]) -> list[str]:
    """The untrusted sources the messages quote, described for people."""
    found: list[str] = []
    for m in messages:
        label = m.provenance if isinstance(m, ToolMessage | UserMessage) else None
        if label is not None and not label.trusted:
            what = label.describe()
            if what not in found:
                found.append(what)
    return found


def names_in(messages: Iterable[Message]) -> list[str]:
    """File names and quoted identifiers in the user's words and the calls' arguments."""
    found: list[str] = []
    for m in messages:
        texts: list[str] = []
        if isinstance(m, UserMessage) and m.from_owner:
            texts.append(m.content)
        elif isinstance(m, AssistantMessage):
            texts += [v for c in m.tool_calls or [] for v in _string_values(c.function.arguments)]
        for text in texts:
            for match in [*_NAME.findall(text), *_QUOTED.findall(text)]:
                name = match.strip(".,;:")
                if len(name) > 1 and not _NUMBER.fullmatch(name) and name not in found:
                    found.append(name)
    return found


def transcript_lines(messages: list[Message]) -> list[str]:
    """One line per user turn, call (with its result) and answer; system turns are skipped."""
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    lines: list[str] = []
    for m in messages:
        if isinstance(m, UserMessage) and not m.from_owner and m.provenance is not None:
            lines.append(f"- ({m.provenance.describe()}: untrusted, not kept)")
        elif isinstance(m, UserMessage):
            lines.append(f"- The user said: {one_line(m.content, 240)}")
        elif isinstance(m, AssistantMessage):
            for call in m.tool_calls or []:
                args = _compact_args(call.function.arguments)
                result = results.get(call.id)
                seen = shown_result(result) if result is not None else "(no result)"
                lines.append(f"- Called {call.function.name}({args}) -> {seen}")
            if m.content:
                lines.append(f"- Answered: {one_line(m.content, 240)}")
    return lines


def extractive_summary(previous: str | None, messages: list[Message], limit: int) -> str:
    """The summary of ``messages`` after ``previous`` (an earlier summary), within ``limit``
    characters."""
    old_lines, old_names = _split(previous)
    lines = [*old_lines, *transcript_lines(messages)]
    names = [*old_names, *(n for n in names_in(messages) if n not in old_names)][-MAX_NAMES:]
    tail = f"{NAMES_PREFIX}{', '.join(names)}" if names else ""
    return _fit(lines, tail, limit)


def with_names(summary: str, messages: list[Message], previous: str | None) -> str:
    """A model's summary, with the files and names it left out listed after it."""
    _, old_names = _split(previous)
    missing = [n for n in [*old_names, *names_in(messages)] if n not in summary]
    unique = list(dict.fromkeys(missing))[-MAX_NAMES:]
    body = summary.strip()
    return f"{body}\n{NAMES_PREFIX}{', '.join(unique)}" if unique else body


def _split(summary: str | None) -> tuple[list[str], list[str]]:
    """An earlier summary's lines, and its names line as a list."""
    if not summary:
        return [], []
    lines, names = [], []
    for line in summary.splitlines():
        if line.startswith(NAMES_PREFIX):
            names = [n for n in line[len(NAMES_PREFIX) :].split(", ") if n]
        elif line.strip() and line != _DROPPED:
            lines.append(line)
    return lines, names


def _fit(lines: list[str], tail: str, limit: int) -> str:
    """Lines joined within ``limit``: the middle goes first, the oldest and newest stay."""
    room = max(limit - len(tail) - len(_DROPPED) - 2, 0)
    if sum(len(x) + 1 for x in lines) <= room:
        kept = lines
    else:
        head_room = room // 3
        head: list[str] = []
        for line in lines:
            if sum(len(x) + 1 for x in head) + len(line) + 1 > head_room:
                break
            head.append(line)
        rest: list[str] = []
        for line in reversed(lines[len(head) :]):
            if sum(len(x) + 1 for x in [*head, *rest]) + len(line) + 1 > room:
                break
            rest.insert(0, line)
        kept = [*head, _DROPPED, *rest]
    return "\n".join([*kept, tail] if tail else kept)


def _string_values(arguments: str) -> list[str]:
    """The string values of a call's arguments (its keys are the tool's, not names used)."""
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return [arguments]
    values = parsed.values() if isinstance(parsed, dict) else [parsed]
    return [v for v in values if isinstance(v, str)]


def _compact_args(arguments: str) -> str:
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return one_line(arguments, 120)
    if isinstance(parsed, dict):
        text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in parsed.items())
        return one_line(text, 120)
    return one_line(arguments, 120)
