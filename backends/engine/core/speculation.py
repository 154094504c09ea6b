"""Prompt-lookup (n-gram) drafts for speculative decoding: no draft model, no tensors.

A request that opts in (``SamplingParams.num_speculative_tokens > 0``) gets, before each of its
decode steps, a guess at its next few tokens: the tokens that followed the most recent earlier
occurrence of its last ``n`` tokens (``n`` from ``max_ngram`` down to ``min_ngram``, the longest
match wins), searched in its own prompt and output. Agents copy a lot (file names, tool
arguments, quoted lines, JSON keys), so such a guess is often right; the model checks every
drafted token in the same forward pass as the real one (``backends.engine.model.verify``), and keeps
the ones it agrees with.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass

MAX_NGRAM = 3
MIN_NGRAM = 1
# How far back the search looks, in tokens: bounds a step's host time on very long contexts.
SEARCH_WINDOW = 8192
# How many different drafts a grammar may choose among (the first it takes whole wins).
MAX_CANDIDATES = 4


def propose_ngram(
    token_ids: list[int],
    num_tokens: int,
    max_ngram: int = MAX_NGRAM,
    min_ngram: int = MIN_NGRAM,
    window: int = SEARCH_WINDOW,
) -> list[int]:
    """Up to ``num_tokens`` tokens that followed the latest earlier copy of the sequence's tail.

    Tries the last ``max_ngram`` tokens first, then shorter tails down to ``min_ngram``; the
    copy nearest the end wins among matches of one length. Empty when nothing matches.
    """
    for draft in ngram_candidates(token_ids, num_tokens, 1, max_ngram, min_ngram, window):
        return draft
    return []


def ngram_candidates(
    token_ids: list[int],
    num_tokens: int,
    limit: int = MAX_CANDIDATES,
    max_ngram: int = MAX_NGRAM,
    min_ngram: int = MIN_NGRAM,
    window: int = SEARCH_WINDOW,
) -> Iterator[list[int]]:
    """Up to ``limit`` different drafts, best first: what followed each earlier copy of the
    sequence's tail, the longest tail first and, among copies of one length, the nearest.

    A caller that can rule drafts out (a grammar) takes the first that survives whole, or
    the one that survives longest; one that cannot takes the first.
    """
    if num_tokens <= 0 or limit <= 0 or len(token_ids) < min_ngram + 1:
        return
    history = token_ids[-window:]
    # The search runs in C: bytes.rfind over 4-byte items, keeping only aligned hits.
    raw = array("I", history).tobytes()
    size = len(history)
    seen: set[tuple[int, ...]] = set()
    for n in range(min(max_ngram, size - 1), min_ngram - 1, -1):
        pattern = raw[(size - n) * 4 :]
        # A match must end before the tail itself, and be followed by at least one token.
        end = (size - 1) * 4
        while True:
            at = raw.rfind(pattern, 0, end)
            if at < 0:
                break
            end = at + len(pattern) - 1
            if at % 4:
                continue
            start = at // 4 + n
            draft = history[start : start + num_tokens]
            key = tuple(draft)
            if key in seen:
                continue
            seen.add(key)
            yield draft
            if len(seen) == limit:
                return


@dataclass(slots=True)
class SpeculationStats:
    """Counters of drafted, accepted and emitted tokens, and of verification steps."""

    num_drafts: int = 0  # sequence-steps that carried a draft
    num_draft_tokens: int = 0  # tokens proposed
    num_accepted_tokens: int = 0  # of those, tokens the model agreed with
    num_emitted_tokens: int = 0  # tokens those steps produced (accepted + the model's own)

    @property
    def acceptance_rate(self) -> float:
        """Accepted over proposed draft tokens (0 when none was proposed)."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    @property
    def tokens_per_step(self) -> float:
        """Tokens a verification step produced for its sequence, on average (1 would be plain
        decoding)."""
        return self.num_emitted_tokens / self.num_drafts if self.num_drafts else 0.0

    def record(self, drafted: int, accepted: int, emitted: int) -> None:
        """Count one sequence's verification step."""
        self.num_drafts += 1
        self.num_draft_tokens += drafted
        self.num_accepted_tokens += accepted
        self.num_emitted_tokens += emitted
