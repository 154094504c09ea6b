"""Streams only the content part of generated text, as an OpenAI-compatible server does.

Tool-call markup is not content: a client sees the parsed calls when the message is complete,
never the raw ``<tool_call>`` text. Text that might be the start of the tag is held back until
the next piece says whether it is.
"""

from __future__ import annotations

from backends.local.stop_text import partial_suffix


class ContentStream:
    """Feed generated pieces in; get back the part a user should see as it streams.

    ``tag`` is the tool-call format's opening tag (:meth:`ToolCallFormat.stream` makes one).
    """

    def __init__(self, tag: str) -> None:
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
        keep = partial_suffix(text, self.tag)
        self._held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """What was held back, once generation has ended without a tool call."""
        held, self._held = self._held, ""
        return "" if self._in_call else held
