"""Fitting a request into the context when compaction cannot: oversized tool results are cut.

Compaction covers older turns, never the latest ones, so one huge result (a long file read, a
command's whole output) can still leave the request past the model's context, and the model
could not take another step. Then the results in the request are cut down to one common
length, the longest first (water-filling), each keeping its start and end around a note that
says how much was cut and how to see it. Only the request changes: the session keeps each
result as the loop stored it. The cut is worked out from the request alone: no model call.
"""

from __future__ import annotations

from agent.messages import ChatRequest, Message, ToolMessage

MIN_KEEP = 200  # characters of a result that are always kept
_NOTE = (
    "\n[... {cut} characters cut here to fit the model's context. Ask for a smaller part "
    "(a line range, a pattern) to see them.]\n"
)


def fit_results(request: ChatRequest, room: int) -> tuple[ChatRequest, int]:
    """``request`` with its tool results cut so that together they take at most ``room``
    characters; and how many were cut (0: the request as it was)."""
    results = [m.content for m in request.messages if isinstance(m, ToolMessage)]
    if sum(len(r) for r in results) <= room:
        return request, 0
    cap = _level(sorted(len(r) for r in results), room)
    messages: list[Message] = []
    cut = 0
    for m in request.messages:
        if isinstance(m, ToolMessage) and len(m.content) > cap:
            messages.append(m.model_copy(update={"content": shortened(m.content, cap)}))
            cut += 1
        else:
            messages.append(m)
    return request.model_copy(update={"messages": messages}), cut


def shortened(text: str, cap: int) -> str:
    """``text`` in at most about ``cap`` characters: its start and end around the note."""
    note = _NOTE.format(cut=len(text))
    keep = max(cap - len(note), MIN_KEEP)
    head, tail = keep * 2 // 3, keep - keep * 2 // 3
    note = _NOTE.format(cut=len(text) - head - tail)
    return f"{text[:head]}{note}{text[len(text) - tail :]}"


def _level(lengths: list[int], room: int) -> int:
    """The largest cap with sum(min(length, cap)) <= room, for lengths in ascending order."""
    left = room
    for i, length in enumerate(lengths):
        share = left // (len(lengths) - i)
        if length > share:
            return max(share, MIN_KEEP)
        left -= length
    return lengths[-1] if lengths else room
