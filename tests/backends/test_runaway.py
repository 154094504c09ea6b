"""The runaway detector cuts a reply stuck in a loop soon after it starts looping, and never a
reply that only looks alike."""

from __future__ import annotations

import random

from backends.local.runaway import MIN_SPAN, RunawayDetector


def _first_cut(tokens: list[int]) -> int | None:
    detector = RunawayDetector()
    for index, token in enumerate(tokens, 1):
        if detector.feed(token):
            return index
    return None


def test_a_loop_is_cut_soon_after_it_starts() -> None:
    prefix = list(range(1000, 1040))  # a sensible start, then "Sorted by words.txt." forever
    cut = _first_cut(prefix + [11, 22, 33, 44, 55, 66] * 300)
    assert cut is not None and len(prefix) + MIN_SPAN <= cut <= len(prefix) + MIN_SPAN + 8


def test_one_token_repeated_and_long_blocks_are_loops_too() -> None:
    assert _first_cut([7] * 400) == MIN_SPAN
    block = list(range(500, 530))  # 30 tokens, the longest kind of block looked for
    cut = _first_cut(block * 20)
    assert cut is not None and cut <= 8 * 30 + 8


def test_varied_text_and_counting_are_never_cut() -> None:
    rng = random.Random(3)
    assert _first_cut([rng.randrange(49152) for _ in range(3000)]) is None
    counting = [t for n in range(1, 400) for t in (100 + n % 10, 200 + n // 10 % 10, 13)]
    assert _first_cut(counting) is None  # "1\n2\n3\n...": similar lines, no exact loop
    # A short repeat inside varied text is not a runaway either.
    mixed = [rng.randrange(49152) for _ in range(100)] + [5, 6] * 40
    assert _first_cut(mixed + [rng.randrange(49152) for _ in range(500)]) is None
