"""Stop strings in streamed text: cut at the first one, and hold back a tail that may start one.

Used wherever generated text streams out of a local model: the llama.cpp decoder, the bundled
engine's output processing, and the content filter that keeps tool-call markup out of the
stream.
"""

from __future__ import annotations


def partial_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


class StopStringMatcher:
    """Finds the first stop string in streamed text and holds back tails that may start one."""

    def __init__(self, stop_strings: list[str]) -> None:
        self.stop_strings = [s for s in stop_strings if s]
        self.longest = max((len(s) for s in self.stop_strings), default=0)
        self.text = ""
        self.emitted = 0
        self.stopped = False

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
            self.stopped = True
            return self._emit_to(end), True
        held = max((partial_suffix(self.text, s) for s in self.stop_strings), default=0)
        return self._emit_to(len(self.text) - held), False

    def flush(self) -> str:
        """Whatever was held back: the stream ended without completing a stop string."""
        return self._emit_to(len(self.text))

    def _emit_to(self, end: int) -> str:
        if end <= self.emitted:
            return ""
        piece = self.text[self.emitted : end]
        self.emitted = end
        return piece
