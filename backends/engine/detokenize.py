"""Token ids to streamed text: incremental detokenization and stop-string matching.

A token can end in the middle of a UTF-8 character (byte-level BPE splits emoji and CJK into
several tokens), so text is only emitted once the decoded tail is no longer U+FFFD. Stop strings are
matched on the text, and a tail that could still grow into a stop string is held back, so the
stream never shows part of a stop string that later matches.
"""

from __future__ import annotations

from typing import Protocol

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


class StopStringMatcher:
    """Finds the first stop string in streamed text and holds back tails that may start one."""

    def __init__(self, stop_strings: list[str]) -> None:
        self.stop_strings = [s for s in stop_strings if s]
        self.longest = max((len(s) for s in self.stop_strings), default=0)
        self.text = ""
        self.emitted = 0

    def feed(self, delta: str) -> tuple[str, bool]:
        """Add ``delta``; return (text safe to emit now, whether a stop string was found).

        When a stop string is found, the text returned ends right before it.
        """
        self.text += delta
        if not self.stop_strings:
            return self._emit_to(len(self.text)), False
        search_from = max(0, len(self.text) - len(delta) - self.longest + 1)
        found = [i for i in (self.text.find(s, search_from) for s in self.stop_strings) if i >= 0]
        if found:
            end = min(found)
            self.text = self.text[:end]
            return self._emit_to(end), True
        return self._emit_to(len(self.text) - self._held_tail()), False

    def flush(self) -> str:
        """Whatever was held back: the stream ended without completing a stop string."""
        return self._emit_to(len(self.text))

    def _held_tail(self) -> int:
        """Length of the longest tail of the text that is a proper prefix of some stop string."""
        for size in range(min(self.longest - 1, len(self.text)), 0, -1):
            tail = self.text[-size:]
            if any(s.startswith(tail) for s in self.stop_strings):
                return size
        return 0

    def _emit_to(self, end: int) -> str:
        if end <= self.emitted:
            return ""
        piece = self.text[self.emitted : end]
        self.emitted = end
        return piece
