"""Block manager: reference counts, the LRU free list and the prefix cache, without any model."""

from __future__ import annotations

import pytest

from backends.engine.core import block_manager as bm_module
from backends.engine.core.block_manager import BlockManager, hash_block
from backends.engine.core.params import SamplingParams
from backends.engine.core.sequence import Sequence


def make_seq(seq_id: int, tokens: list[int]) -> Sequence:
    return Sequence.new(seq_id, tokens, SamplingParams())


def compute_all(bm: BlockManager, seq: Sequence, cached: list[int] | None = None) -> None:
    """Allocate and 'compute' every uncomputed token of ``seq``, as one prefill step would."""
    cached = cached or []
    todo = seq.num_tokens - seq.num_computed_tokens - len(cached) * bm.block_size
    assert bm.allocate_slots(seq, todo, cached)
    seq.num_computed_tokens += todo
    bm.cache_full_blocks(seq)


def test_hash_chains_over_the_parent() -> None:
    assert hash_block(None, [1, 2]) == hash_block(None, [1, 2])
    assert hash_block(None, [1, 2]) != hash_block(None, [2, 1])
    assert hash_block(1, [1, 2]) != hash_block(2, [1, 2])


def test_allocate_counts_blocks_and_free_returns_them() -> None:
    bm = BlockManager(num_blocks=8, block_size=4)
    seq = make_seq(0, list(range(10)))
    assert bm.allocate_slots(seq, 10)
    assert len(seq.block_table) == 3 and bm.num_free_blocks == 5
    bm.check_invariants([seq])
    bm.free_blocks(seq)
    assert seq.block_table == [] and bm.num_free_blocks == 8
    bm.check_invariants([])


def test_allocation_that_does_not_fit_changes_nothing() -> None:
    bm = BlockManager(num_blocks=2, block_size=4)
    seq = make_seq(0, list(range(12)))
    assert not bm.allocate_slots(seq, 12)
    assert seq.block_table == [] and bm.num_free_blocks == 2
    bm.check_invariants([seq])


def test_prefix_hit_shares_full_blocks_and_recomputes_the_last_token() -> None:
    bm = BlockManager(num_blocks=16, block_size=4)
    first = make_seq(0, list(range(10)))
    compute_all(bm, first)
    second = make_seq(1, [*range(10), 99])
    hits = bm.find_cached_prefix(second)
    assert hits == first.block_table[:2]  # the partial third block is never shared
    compute_all(bm, second, hits)
    assert [bm.blocks[b].ref_count for b in hits] == [2, 2]
    bm.check_invariants([first, second])
    # A prompt that is exactly two blocks long still recomputes its last token: one block hit.
    exact = make_seq(2, list(range(8)))
    assert bm.find_cached_prefix(exact) == first.block_table[:1]


def test_freed_blocks_stay_cached_until_reused_and_revive() -> None:
    bm = BlockManager(num_blocks=4, block_size=4)
    first = make_seq(0, list(range(9)))
    compute_all(bm, first)
    full = first.block_table[:2]
    bm.free_blocks(first)
    again = make_seq(1, list(range(9)))
    hits = bm.find_cached_prefix(again)
    assert hits == full
    compute_all(bm, again, hits)
    assert again.num_computed_tokens == 9
    assert bm.num_free_blocks == 1
    bm.check_invariants([again])


def test_finished_sequences_free_tail_first_and_lru_evicts_the_tail() -> None:
    bm = BlockManager(num_blocks=4, block_size=2)
    seq = make_seq(0, [1, 2, 3, 4, 5, 6, 7])
    compute_all(bm, seq)
    table = list(seq.block_table)
    bm.free_blocks(seq)
    assert list(bm.free) == table[::-1]  # tail first: the tail is the least recently released
    # Reusing two blocks evicts the partial tail and the last full block: the head survives.
    other = make_seq(1, [9, 9, 9, 9])
    compute_all(bm, other)
    assert bm.find_cached_prefix(make_seq(2, [1, 2, 3, 4, 5])) == table[:2]
    bm.check_invariants([other])


def test_generated_tokens_are_registered_as_blocks_fill() -> None:
    bm = BlockManager(num_blocks=8, block_size=4)
    seq = make_seq(0, [1, 2, 3])
    compute_all(bm, seq)
    assert bm.hash_to_block == {}
    seq.token_ids.append(4)  # a sampled token, computed next step
    compute_all(bm, seq)
    assert len(bm.hash_to_block) == 1
    follow_up = make_seq(1, [1, 2, 3, 4, 5])
    assert bm.find_cached_prefix(follow_up) == seq.block_table[:1]


def test_hash_collision_never_serves_wrong_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm_module, "hash_block", lambda parent, tokens: 7)
    bm = BlockManager(num_blocks=8, block_size=2)
    first = make_seq(0, [1, 2, 3])
    compute_all(bm, first)
    assert len(bm.hash_to_block) == 1
    other = make_seq(1, [5, 6, 7])  # same (forced) hash, other tokens
    assert bm.find_cached_prefix(other) == []
    compute_all(bm, other)
    bm.check_invariants([first, other])


def test_duplicate_blocks_are_not_registered_twice() -> None:
    bm = BlockManager(num_blocks=8, block_size=2)
    a, b = make_seq(0, [1, 2, 3]), make_seq(1, [1, 2, 3])
    compute_all(bm, a)
    assert bm.allocate_slots(b, 3)  # computed side by side, without taking the hit
    b.num_computed_tokens = 3
    bm.cache_full_blocks(b)
    assert len(bm.hash_to_block) == 1
    bm.check_invariants([a, b])
    bm.free_blocks(a)
    bm.free_blocks(b)
    bm.check_invariants([])


def test_prefix_caching_can_be_turned_off() -> None:
    bm = BlockManager(num_blocks=8, block_size=2, enable_prefix_caching=False)
    seq = make_seq(0, [1, 2, 3, 4, 5])
    compute_all(bm, seq)
    assert bm.hash_to_block == {}
    assert bm.find_cached_prefix(make_seq(1, [1, 2, 3, 4, 5])) == []
