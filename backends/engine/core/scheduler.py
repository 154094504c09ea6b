"""Continuous batching: which sequences run this step and how many of their tokens.

There are no prefill and decode phases (the vLLM v1 design): a sequence has ``num_computed_tokens``
and every step shares one token budget, first among the running sequences (a decode needs one token,
an unfinished prefill takes the next chunk), then among waiting ones, which are admitted while
blocks, the budget and the sequence limit allow. When blocks run out, the most recently admitted
sequence is preempted: its blocks are freed and it is recomputed later (its tokens are kept, so
it resumes where it was; the prefix cache often makes the recompute cheap).

Below the in-memory prefix cache there may be a :class:`PrefixStore` (the disk cache): full
blocks it holds past the in-memory hits are taken as computed at admission, their values read
now and handed to the runner with the step's plan (``SchedulerOutput.loads``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any, Protocol

from backends.engine.core.block_manager import BlockManager
from backends.engine.core.engine_config import EngineConfig
from backends.engine.core.sequence import Sequence, SequenceStatus


class PrefixStore(Protocol):
    """Full KV blocks kept outside the pool (on disk), by chained block hash."""

    def contains(self, block_hash: int) -> bool: ...

    def read(self, block_hash: int, token_ids: Seq[int]) -> Any | None:
        """The block's values (a buffer for the runner), or None if it cannot be used."""
        ...


@dataclass(slots=True)
class SchedulerOutput:
    """One step's plan: (sequence, number of new tokens) in batch order, and who was preempted.

    ``loads`` are (block id, values) read from the prefix store: the runner must write them into
    the pool before this step's forward pass.
    """

    scheduled: list[tuple[Sequence, int]] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)
    loads: list[tuple[int, Any]] = field(default_factory=list)

    @property
    def num_batched_tokens(self) -> int:
        return sum(n for _, n in self.scheduled)

    def __bool__(self) -> bool:
        return bool(self.scheduled)


class Scheduler:
    """Owns the waiting queue and the running list; pure bookkeeping, no tensors."""

    def __init__(
        self,
        block_manager: BlockManager,
        config: EngineConfig,
        prefix_store: PrefixStore | None = None,
    ) -> None:
        """Batch as ``config`` says: its sequence and token limits per step, and its prefill cap
        (``long_prefill_token_threshold``: one sequence's prefill chunk at most, so a long prompt
        cannot take the whole step; 0 = off)."""
        if config.max_num_seqs < 1 or config.max_num_batched_tokens < 1:
            raise ValueError("max_num_seqs and max_num_batched_tokens must be at least 1")
        self.block_manager = block_manager
        self.max_num_seqs = config.max_num_seqs
        self.max_num_batched_tokens = config.max_num_batched_tokens
        self.long_prefill_token_threshold = config.long_prefill_token_threshold
        self.prefix_store = prefix_store if block_manager.enable_prefix_caching else None
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self._preempted: list[Sequence] = []  # reported by the next schedule()

    def add(self, seq: Sequence) -> None:
        """Queue a new sequence; it is admitted at the next step that has room for it."""
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def live_sequences(self) -> list[Sequence]:
        """Every sequence the scheduler holds, running first."""
        return [*self.running, *self.waiting]

    def schedule(self) -> SchedulerOutput:
        """Plan one step: running decodes, then running prefills, then waiting sequences."""
        out = SchedulerOutput(preempted=self._preempted)
        self._preempted = []
        budget = self.max_num_batched_tokens
        planned: dict[int, int] = {}  # seq_id -> new tokens, for sequences scheduled so far
        # Decodes first (one token each), then unfinished prefills; each group in admission order.
        for seq in sorted(self.running, key=lambda s: s.num_uncomputed_tokens > 1):
            if budget <= 0:
                break
            if seq.status is not SequenceStatus.RUNNING:  # preempted earlier in this loop
                continue
            num_new = self._chunk(seq.num_uncomputed_tokens + len(seq.draft_ids), budget)
            while not self.block_manager.allocate_slots(seq, num_new):
                if seq.draft_ids:  # a guess never costs another sequence its blocks
                    seq.draft_ids = []
                    num_new = self._chunk(seq.num_uncomputed_tokens, budget)
                    continue
                victim = self.running.pop()  # the most recently admitted
                if victim.seq_id in planned:  # scheduled already: give back its tokens
                    budget += planned.pop(victim.seq_id)
                self._preempt(victim)
                if victim is seq:
                    break
            else:
                # Drafts past the budget are dropped; the rest ride along after the last token.
                keep = max(num_new - seq.num_uncomputed_tokens, 0)
                if keep < len(seq.draft_ids):
                    seq.cut_draft(keep)  # may keep fewer, never more
                    num_new -= keep - len(seq.draft_ids)
                planned[seq.seq_id] = num_new
                budget -= num_new
        out.scheduled = [(s, planned[s.seq_id]) for s in self.running if s.seq_id in planned]
        out.scheduled.sort(key=lambda item: item[0].num_uncomputed_tokens > 1)
        # After a preemption the pool is full: admitting now would only preempt again.
        if not self._preempted:
            self._admit(out, budget)
        out.preempted += self._preempted
        self._preempted = []
        return out

    def _admit(self, out: SchedulerOutput, budget: int) -> None:
        bm = self.block_manager
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            cached = bm.find_cached_prefix(seq)
            stored = self._stored_blocks(seq, len(cached))
            uncomputed = seq.num_tokens - (len(cached) + stored) * bm.block_size
            num_new = self._chunk(uncomputed, budget)
            # The stored blocks take fresh blocks, counted as computed once their values are read.
            if not bm.allocate_slots(seq, stored * bm.block_size + num_new, cached):
                break
            if stored:
                loaded = self._load_stored(seq, len(cached), stored, out)
                seq.num_computed_tokens += loaded * bm.block_size
            self.waiting.popleft()
            if seq.num_preemptions == 0:
                seq.num_cached_tokens = min(seq.num_computed_tokens, seq.num_prompt_tokens)
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            out.scheduled.append((seq, num_new))
            budget -= num_new

    def _stored_blocks(self, seq: Sequence, start: int) -> int:
        """How many full blocks from block ``start`` on the prefix store holds (never the last
        token's: its logits are needed)."""
        if self.prefix_store is None:
            return 0
        bm = self.block_manager
        count = 0
        for index in range(start, (seq.num_tokens - 1) // bm.block_size):
            if not self.prefix_store.contains(bm.block_hash(seq, index)):
                break
            count += 1
        return count

    def _load_stored(self, seq: Sequence, start: int, count: int, out: SchedulerOutput) -> int:
        """Read ``count`` stored blocks into ``seq``'s freshly allocated ones; stops at the first
        that cannot be used (its tokens are then computed) and returns how many were read."""
        bm, store = self.block_manager, self.prefix_store
        for index in range(start, start + count):
            tokens = seq.block_tokens(index, bm.block_size)
            values = store.read(bm.block_hash(seq, index), tokens) if store else None
            if values is None:
                return index - start
            out.loads.append((seq.block_table[index], values))
        return count

    def _chunk(self, uncomputed: int, budget: int) -> int:
        num_new = min(uncomputed, budget)
        if self.long_prefill_token_threshold > 0:
            num_new = min(num_new, self.long_prefill_token_threshold)
        return num_new

    def on_step_done(self, out: SchedulerOutput) -> None:
        """The model ran ``out``: advance computed tokens, offer full blocks to the prefix cache."""
        for seq, num_new in out.scheduled:
            if seq.is_finished:  # aborted while the step ran
                continue
            seq.num_computed_tokens += num_new
            self.block_manager.cache_full_blocks(seq)

    def finish(self, seq: Sequence, reason: str) -> None:
        """Retire ``seq`` at once: free its blocks (tail first) and drop it from the queues."""
        if seq.is_finished:
            return
        if seq.status is SequenceStatus.RUNNING:
            self.running.remove(seq)
        else:
            self.waiting.remove(seq)
        self.block_manager.free_blocks(seq)
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason = reason

    def abort(self, seq_id: int) -> Sequence | None:
        """Finish the sequence ``seq_id`` with reason "abort"; None if it is not live."""
        for seq in self.live_sequences():
            if seq.seq_id == seq_id:
                self.finish(seq, "abort")
                return seq
        return None

    def preempt_newest(self) -> Sequence | None:
        """Preempt the most recently admitted running sequence (None if nothing runs)."""
        if not self.running:
            return None
        seq = self.running.pop()
        self._preempt(seq)
        return seq

    def _preempt(self, seq: Sequence) -> None:
        """Free all of ``seq``'s blocks and put it at the head of the queue to be recomputed."""
        self.block_manager.free_blocks(seq)
        seq.num_computed_tokens = 0
        seq.draft_ids = []
        seq.num_preemptions += 1
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)
        self._preempted.append(seq)

    def check_invariants(self) -> None:
        """Raise ``RuntimeError`` if block accounting or queue state is inconsistent."""
        self.block_manager.check_invariants(self.live_sequences())
        for seq in self.running:
            if seq.status is not SequenceStatus.RUNNING:
                raise RuntimeError(f"sequence {seq.seq_id} is in the running list but {seq.status}")
        for seq in self.waiting:
            if (
                seq.status is not SequenceStatus.WAITING
                or seq.block_table
                or seq.num_computed_tokens
            ):
                raise RuntimeError(f"waiting sequence {seq.seq_id} holds blocks or computed tokens")
        if len(self.running) > self.max_num_seqs:
            raise RuntimeError(f"{len(self.running)} running sequences, limit {self.max_num_seqs}")
