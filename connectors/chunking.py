"""Splitting a reply at a platform's length limit without breaking its code blocks.

A chunk that ends inside a fenced block closes the fence, and the next chunk reopens it with
the same info string, so every chunk renders on its own.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^\s*(```+|~~~+)(.*)$")


def split_message(text: str, limit: int) -> list[str]:
    """``text`` in chunks of at most ``limit`` characters, split at line ends where possible."""
    if limit < 40:
        raise ValueError("limit must leave room for closing and reopening a code fence")
    if len(text) <= limit:
        return [text] if text else []
    chunks: list[str] = []
    current = ""
    fence: str | None = None  # the opening line of the block we are inside, if any
    for line in _lines(text, limit - 10):
        after = _track(fence, line)
        # Room is kept for the closer the chunk needs if it ends right after this line.
        closing = "\n" + _closer(after) if after else ""
        if current and len(current) + len(line) + len(closing) > limit:
            chunks.append(current.rstrip("\n") + ("\n" + _closer(fence) if fence else ""))
            current = _reopen(fence, len(line) + len(closing), limit)
        current += line
        fence = after
    if current.strip():
        chunks.append(current.rstrip("\n"))
    return chunks


def _lines(text: str, width: int) -> list[str]:
    """Lines with their newline kept; a line longer than ``width`` is cut into pieces."""
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        while len(line) > width:
            out.append(line[:width] + "\n")
            line = line[width:]
        out.append(line)
    return out


def _track(fence: str | None, line: str) -> str | None:
    m = _FENCE.match(line)
    if not m:
        return fence
    if fence is None:
        return line.rstrip("\n").strip()
    marker = _FENCE.match(fence)
    if marker and m.group(1).startswith(marker.group(1)[0]) and not m.group(2).strip():
        return None
    return fence


def _reopen(fence: str | None, needed: int, limit: int) -> str:
    """The fence line that starts the next chunk; its info string is dropped if it won't fit."""
    if fence is None:
        return ""
    if len(fence) + 1 + needed <= limit:
        return fence + "\n"
    return _closer(fence) + "\n"


def _closer(fence: str | None) -> str:
    m = _FENCE.match(fence or "")
    return m.group(1) if m else "```"
