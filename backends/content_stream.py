"""Streams only the content part of generated text, as an OpenAI-compatible server does.

Tool-call markup is not content: a client sees the parsed calls when the message is complete,
never the raw ``<tool_call>`` text. Text that might be the start of the tag is held back until
the next piece says whether it is.
"""

from __future__ import annotations

from backends.parsing import OPEN


class ContentStream:
    """Feed generated pieces in; get back the part a user should see as it streams."""

    def __init__(self, tag: str = OPEN) -> None:
        self.tag = tag
        self._held = ""
        self._in_call = False

    def feed(self, piece: str) -> str:
        """The visible text this piece releases (possibly empty)."""
        if self._in_call:
            return ""
        text = self._held + piece
        at = text.find(self.tag)
        if at >= 0:
            self._in_call = True
            self._held = ""
            return text[:at]
        keep = self._partial_tag_length(text)
        self._held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """What was held back, once generation has ended without a tool call."""
        held, self._held = self._held, ""
        return "" if self._in_call else held

    def _partial_tag_length(self, text: str) -> int:
        """Length of the longest suffix of ``text`` that is a proper prefix of the tag."""
        for size in range(min(len(self.tag) - 1, len(text)), 0, -1):
            if text.endswith(self.tag[:size]):
                return size
        return 0
