"""Scheduler: one token budget shared by decodes then prefill chunks, admission, preemption."""

from __future__ import annotations

from typing import Any

from backends.engine.core.batch import build_step_batch
from backends.engine.core.block_manager import BlockManager
from backends.engine.core.engine_config import EngineConfig
from backends.engine.core.params import SamplingParams
from backends.engine.core.scheduler import Scheduler, SchedulerOutput
from backends.engine.core.sequence import Sequence, SequenceStatus


def make(num_blocks: int = 32, block_size: int = 4, **kwargs: Any) -> Scheduler:
    return Scheduler(BlockManager(num_blocks, block_size), EngineConfig(**kwargs))


def seq(seq_id: int, length: int, first: int = 0) -> Sequence:
    return Sequence.new(seq_id, list(range(first, first + length)), SamplingParams())


def finish_step(sched: Scheduler, out: SchedulerOutput, token: int = 1) -> None:
    """Pretend the model ran: advance, and give every sequence that sampled a new token."""
    sampled = [s for s, n in out.scheduled if s.num_computed_tokens + n == s.num_tokens]
    sched.on_step_done(out)
    for s in sampled:
        s.token_ids.append(token)
    sched.check_invariants()


def test_decodes_come_first_then_prefill_chunks_share_the_budget() -> None:
    sched = make(max_num_batched_tokens=8)
    a = seq(0, 3)
    sched.add(a)
    finish_step(sched, sched.schedule())  # a prefilled, now decoding
    b, c = seq(1, 10, 100), seq(2, 5, 200)
    sched.add(b)
    sched.add(c)
    out = sched.schedule()
    assert [(s.seq_id, n) for s, n in out.scheduled] == [(0, 1), (1, 7)]  # c waits: no budget left
    finish_step(sched, out)
    out = sched.schedule()
    assert [(s.seq_id, n) for s, n in out.scheduled] == [(0, 1), (1, 3), (2, 4)]


def test_chunked_prefill_samples_only_at_the_end_of_the_prompt() -> None:
    sched = make(max_num_batched_tokens=4)
    s = seq(0, 10)
    sched.add(s)
    chunks, samples = [], []
    for _ in range(3):
        out = sched.schedule()
        batch = build_step_batch(out.scheduled, 4)
        chunks.append(batch.query_lens[0])
        samples.append(batch.sample_indices)
        finish_step(sched, out)
    assert chunks == [4, 4, 2] and samples == [[], [], [0]]
    assert s.num_tokens == 11 and s.num_computed_tokens == 10


def test_batch_slots_follow_the_block_table() -> None:
    sched = make(block_size=4)
    s = seq(0, 6)
    sched.add(s)
    batch = build_step_batch(sched.schedule().scheduled, 4)
    b0, b1 = s.block_table
    assert batch.positions == list(range(6))
    assert batch.slot_mapping == [b0 * 4 + i for i in range(4)] + [b1 * 4, b1 * 4 + 1]
    assert batch.context_lens == [6] and batch.output_counts == [0]


def test_max_num_seqs_limits_admission() -> None:
    sched = make(max_num_seqs=2)
    for i in range(3):
        sched.add(seq(i, 2, 10 * i))
    out = sched.schedule()
    assert len(out.scheduled) == 2 and len(sched.waiting) == 1


def test_out_of_blocks_preempts_the_most_recently_admitted() -> None:
    sched = make(num_blocks=4, block_size=2)
    a, b = seq(0, 4), seq(1, 3, 50)
    sched.add(a)
    sched.add(b)
    finish_step(
        sched, sched.schedule()
    )  # a: 5 tokens (3 blocks needed next); b: 4 tokens (2 blocks)
    out = sched.schedule()
    assert out.preempted == [b]
    assert [s.seq_id for s, _ in out.scheduled] == [0]
    assert sched.waiting[0] is b and b.status is SequenceStatus.WAITING
    assert b.num_computed_tokens == 0 and b.num_tokens == 4  # keeps its sampled token
    finish_step(sched, out)


def test_a_preempted_sequence_is_recomputed_from_its_cached_prefix() -> None:
    sched = make(num_blocks=6, block_size=2)
    s = seq(0, 5)
    sched.add(s)
    finish_step(sched, sched.schedule())
    assert sched.preempt_newest() is s
    out = sched.schedule()
    # 6 tokens: two full blocks are still cached, the rest is recomputed.
    assert out.scheduled == [(s, 2)] and s.num_computed_tokens == 4
    finish_step(sched, out)


def test_abort_frees_blocks_at_once() -> None:
    sched = make(num_blocks=8)
    s = seq(0, 9)
    sched.add(s)
    finish_step(sched, sched.schedule())
    assert sched.block_manager.num_free_blocks == 5
    sched.abort(0)
    assert s.finish_reason == "abort" and sched.block_manager.num_free_blocks == 8
    assert not sched.has_unfinished()
    sched.check_invariants()


def test_running_decodes_go_before_an_older_running_prefill() -> None:
    sched = make(max_num_batched_tokens=8, long_prefill_token_threshold=4)
    a, b = seq(0, 20), seq(1, 2, 100)
    sched.add(a)
    sched.add(b)
    out = sched.schedule()
    assert [(s.seq_id, n) for s, n in out.scheduled] == [(0, 4), (1, 2)]
    finish_step(sched, out)
    out = sched.schedule()
    assert [(s.seq_id, n) for s, n in out.scheduled] == [(1, 1), (0, 4)]


def test_preempting_an_already_scheduled_decode_gives_back_its_budget() -> None:
    sched = make(num_blocks=4, block_size=2, long_prefill_token_threshold=2)
    a, b = seq(0, 6), seq(1, 1, 100)
    sched.add(a)
    sched.add(b)
    for _ in range(2):
        finish_step(sched, sched.schedule())
    assert sched.block_manager.num_free_blocks == 1 and b.num_tokens == 3
    out = sched.schedule()  # b's decode takes the last block; a's next chunk then preempts b
    assert out.preempted == [b] and [(s.seq_id, n) for s, n in out.scheduled] == [(0, 2)]
    finish_step(sched, out)
