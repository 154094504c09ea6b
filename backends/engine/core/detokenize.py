"""Token ids to streamed text, detokenized incrementally (stops: :mod:`backends.local.stop_text`).

A token can end in the middle of a UTF-8 character (byte-level BPE splits emoji and CJK into
several tokens), so text is only emitted once the decoded tail is no longer U+FFFD. Stop strings are
matched on the text, and a tail that could still grow into a stop string is held back, so the
stream never shows part of a stop string that later matches.
"""

from __future__ import annotations

from typing import Protocol

from backends.local.stop_text import StopStringMatcher

# Prompt tokens decoded together with the output, so the first output token is decoded in context
# (some tokenizers drop a leading space when a token is decoded alone).
_CONTEXT_TOKENS = 5


class Decodes(Protocol):
    """The part of a tokenizer the detokenizer needs."""

    def decode(self, ids: list[int]) -> str: ...


class IncrementalDetokenizer:
    """Turns generated token ids into text deltas that are always whole characters."""

    def __init__(self, tokenizer: Decodes, prompt_ids: list[int]) -> None:
        self.tokenizer = tokenizer
        self.ids = list(prompt_ids[-_CONTEXT_TOKENS:])
        self.prefix_offset = 0  # start of the window decoded for context
        self.read_offset = len(self.ids)  # tokens before this are already emitted as text

    def add(self, token_id: int) -> str:
        """Append one token; return the new text it completes (possibly empty)."""
        self.ids.append(token_id)
        prefix_text = self.tokenizer.decode(self.ids[self.prefix_offset : self.read_offset])
        new_text = self.tokenizer.decode(self.ids[self.prefix_offset :])
        if new_text.endswith("\ufffd") or len(new_text) <= len(prefix_text):
            return ""  # an unfinished character (or nothing visible yet): wait for more tokens
        self.prefix_offset = self.read_offset
        self.read_offset = len(self.ids)
        return new_text[len(prefix_text) :]


__all__ = ["Decodes", "IncrementalDetokenizer", "StopStringMatcher"]
