"""Runaway repetition: a reply stuck in a loop is cut early instead of at the token limit.

A small model sometimes falls into repeating the same few tokens ("Sorted by words.txt. Sorted
by words.txt. ...") until ``max_tokens``: a thousand tokens, a minute or more of decoding, for a
reply that ends cut off either way. When the last ``MIN_SPAN`` or more tokens are one block of
at most ``MAX_PERIOD`` tokens repeated, decoding stops with finish reason ``length``, so the
caller sees exactly what it would have seen at the limit, only sooner.
"""

from __future__ import annotations

MAX_PERIOD = 32  # longest repeated block looked for, in tokens
MIN_SPAN = 128  # tokens of pure repetition before the reply counts as a runaway
MIN_REPEATS = 8  # and at least this many copies of the block
CHECK_EVERY = 8  # tokens between checks (a check costs MAX_PERIOD * MIN_SPAN comparisons)


def _periodic(tokens: list[int], period: int, span: int) -> bool:
    tail = tokens[-span:]
    return all(tail[i] == tail[i + period] for i in range(span - period))


class RunawayDetector:
    """Feed generated tokens one at a time; :meth:`feed` turns True once they loop."""

    def __init__(self) -> None:
        self.tokens: list[int] = []

    def feed(self, token: int) -> bool:
        self.tokens.append(token)
        count = len(self.tokens)
        if count < MIN_SPAN or count % CHECK_EVERY:
            return False
        return any(
            _periodic(self.tokens, period, max(MIN_SPAN, MIN_REPEATS * period))
            for period in range(1, MAX_PERIOD + 1)
            if count >= max(MIN_SPAN, MIN_REPEATS * period)
        )
