"""Continuous batching: which sequences run this step and how many of their tokens.

There are no prefill and decode phases (the vLLM v1 design): a sequence has ``num_computed_tokens``
and every step shares one token budget, first among the running sequences (a decode needs one token,
an unfinished prefill takes the next chunk), then among waiting ones, which are admitted while
blocks, the budget and the sequence limit allow. When blocks run out, the most recently admitted
sequence is preempted: its blocks are freed and it is recomputed later (its tokens are kept, so
it resumes where it was; the prefix cache often makes the recompute cheap).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from backends.engine.block_manager import BlockManager
from backends.engine.sequence import Sequence, SequenceStatus


@dataclass(slots=True)
class SchedulerOutput:
    """One step's plan: (sequence, number of new tokens) in batch order, and who was preempted."""

    scheduled: list[tuple[Sequence, int]] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)

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
        max_num_seqs: int = 64,
        max_num_batched_tokens: int = 2048,
        long_prefill_token_threshold: int = 0,
    ) -> None:
        if max_num_seqs < 1 or max_num_batched_tokens < 1:
            raise ValueError("max_num_seqs and max_num_batched_tokens must be at least 1")
        self.block_manager = block_manager
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        # Caps one sequence's prefill chunk so a long prompt cannot take the whole step (0 = off).
        self.long_prefill_token_threshold = long_prefill_token_threshold
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
            num_new = self._chunk(seq.num_uncomputed_tokens, budget)
            while not self.block_manager.allocate_slots(seq, num_new):
                victim = self.running.pop()  # the most recently admitted
                if victim.seq_id in planned:  # scheduled already: give back its tokens
                    budget += planned.pop(victim.seq_id)
                self._preempt(victim)
                if victim is seq:
                    break
            else:
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
            uncomputed = seq.num_tokens - len(cached) * bm.block_size
            num_new = self._chunk(uncomputed, budget)
            if not bm.allocate_slots(seq, num_new, cached):
                break
            self.waiting.popleft()
            if seq.num_preemptions == 0:
                seq.num_cached_tokens = min(seq.num_computed_tokens, seq.num_prompt_tokens)
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            out.scheduled.append((seq, num_new))
            budget -= num_new

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
