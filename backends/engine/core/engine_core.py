"""The engine core: the step loop's state, touched only by the thread that runs steps.

Other threads never wait for a forward pass: :meth:`EngineCore.add` and :meth:`EngineCore.abort`
only put a message in an inbox, which the next :meth:`EngineCore.step` drains before it plans
(requests join and aborts land between steps, as in vLLM's engine core). A step decides only
what must be decided before the next forward pass: end tokens, ``max_tokens``, the context limit
and the grammar (its state shapes the next token mask). Detokenizing and stop strings are the
front end's work (``backends.engine.core.output``), done by whoever reads the outputs.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, cast

from backends.engine.core.batch import StepBatch, build_step_batch
from backends.engine.core.block_manager import BlockManager
from backends.engine.core.engine_config import EngineConfig
from backends.engine.core.grammar_drafts import grammar_draft
from backends.engine.core.params import SamplingParams
from backends.engine.core.scheduler import Scheduler
from backends.engine.core.sequence import Sequence
from backends.engine.core.speculation import SpeculationStats, propose_ngram

if TYPE_CHECKING:
    from backends.engine.core.disk_cache import DiskKVCache


MAX_BACK_OFF = 4  # at most 2**4 - 1 = 15 plain steps between drafting attempts


class Runner(Protocol):
    """What the engine needs from a model runner (``ModelRunner`` or a test double)."""

    num_blocks: int
    block_size: int
    tokenizer: Any  # .decode(ids) -> str and .eos_token_ids

    def execute(self, batch: StepBatch) -> list[int]: ...


class Speculator(Protocol):
    """A runner that can verify drafts (``ModelRunner``): per sampled sequence, the tokens it
    emits (kept drafts, then one of its own). Without it no request speculates."""

    def execute_speculative(self, batch: StepBatch) -> list[list[int]]: ...


class BlockTransfer(Protocol):
    """What a runner needs for the disk cache: copy whole blocks out of and into its pool."""

    def save_blocks(self, block_ids: list[int]) -> list[Any]: ...

    def load_blocks(self, block_ids: list[int], values: list[Any]) -> None: ...


@dataclass(slots=True)
class CoreOutput:
    """What one step did to one request: the token it sampled, and how it ended if it did."""

    request_id: int
    token_ids: list[int]
    finish_reason: str | None = None  # "stop", "length" or "abort"
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    # False when the last token ends the request without being text (an end token, or one
    # the grammar refused): the front end must not detokenize it.
    shown: bool = True


@dataclass(slots=True)
class EngineStats:
    """Counters and gauges for monitoring; a fresh snapshot is published after every step."""

    num_running: int = 0
    num_waiting: int = 0
    num_blocks: int = 0
    num_used_blocks: int = 0
    num_preemptions: int = 0
    num_steps: int = 0
    prefix_cache_queries: int = 0  # prompt tokens looked up in the prefix cache
    prefix_cache_hits: int = 0  # of those, tokens found there
    prompt_tokens: int = 0
    generation_tokens: int = 0
    disk_cache_hits: int = 0  # tokens read back from the disk cache (after preemptions too)
    # Speculative decoding: drafted and accepted tokens, verification steps
    speculation: SpeculationStats = field(default_factory=SpeculationStats)

    @property
    def kv_cache_usage(self) -> float:
        """Fraction of KV blocks held by live requests (0 to 1)."""
        return self.num_used_blocks / self.num_blocks if self.num_blocks else 0.0


@dataclass(slots=True)
class _Add:
    request_id: int
    prompt_ids: list[int]
    params: SamplingParams
    constraint: object | None
    stop_ids: frozenset[int]


@dataclass(slots=True)
class _Live:
    seq: Sequence
    stop_ids: frozenset[int]
    admitted: bool = False
    # Speculation back-off: verification steps in a row that kept no draft, and decode steps
    # left to run without drafting.
    draft_misses: int = 0
    draft_pause: int = 0


class EngineCore:
    """Scheduler, block manager and runner, advanced one step at a time by one thread."""

    def __init__(
        self, runner: Runner, config: EngineConfig, disk_cache: DiskKVCache | None = None
    ) -> None:
        self.runner = runner
        self.config = config
        self.block_size = runner.block_size
        self.block_manager = BlockManager(
            runner.num_blocks, runner.block_size, config.enable_prefix_caching
        )
        if not config.enable_prefix_caching:
            disk_cache = None  # the disk cache sits below the in-memory one and needs its hashes
        if disk_cache is not None and not hasattr(runner, "load_blocks"):
            raise TypeError("the disk cache needs a runner with save_blocks and load_blocks")
        self.disk_cache = disk_cache
        self.scheduler = Scheduler(self.block_manager, config, disk_cache)
        self.max_model_len = _max_model_len(runner, config)
        self.kv_usage: list[float] = []  # per step: token slots holding tokens / slots held
        self.stats = EngineStats(num_blocks=runner.num_blocks)
        self._inbox: queue.SimpleQueue[_Add | int] = queue.SimpleQueue()
        self._pending = 0  # messages put in the inbox and not drained yet
        self._pending_lock = threading.Lock()
        self._live: dict[int, _Live] = {}
        self._speculates = hasattr(runner, "execute_speculative")
        self._aborted: list[CoreOutput] = []

    # --- from any thread -------------------------------------------------------------------------

    def add(self, message: _Add) -> None:
        """Queue a request; it joins at the next step."""
        with self._pending_lock:
            self._pending += 1
        self._inbox.put(message)

    def abort(self, request_id: int) -> None:
        """Queue an abort; it lands before the next step plans (unknown ids are ignored)."""
        with self._pending_lock:
            self._pending += 1
        self._inbox.put(request_id)

    def has_pending(self) -> bool:
        """True while a request or abort is queued and not taken in yet."""
        return self._pending > 0

    # --- from the stepping thread only ----------------------------------------------------------

    def has_unfinished(self) -> bool:
        """True while something is queued, live, or still to be reported."""
        return self.has_pending() or self.scheduler.has_unfinished() or bool(self._aborted)

    def step(self) -> list[CoreOutput]:
        """Take in the inbox, then run one forward pass over everything scheduled."""
        self._drain()
        outputs, self._aborted = self._aborted, []
        self._propose_drafts()
        plan = self.scheduler.schedule()
        self.stats.num_preemptions += len(plan.preempted)
        for seq in plan.preempted:
            _replay_constraint(seq)
        if plan:
            self._count_admissions(plan.scheduled)
            batch = build_step_batch(plan.scheduled, self.block_size)
            if self.config.record_kv_usage:
                self.kv_usage.append(self._kv_usage(batch))
            if plan.loads:
                ids, values = zip(*plan.loads, strict=True)
                cast(BlockTransfer, self.runner).load_blocks(list(ids), list(values))
                self.stats.disk_cache_hits += len(ids) * self.block_size
            if batch.has_drafts:
                emitted = cast(Speculator, self.runner).execute_speculative(batch)
            else:
                emitted = [[int(t)] for t in self.runner.execute(batch)]
            if len(emitted) != len(batch.sample_indices):
                raise RuntimeError(
                    f"runner gave {len(emitted)} tokens for {len(batch.sample_indices)} sequences"
                )
            drafted = batch.drafts or [[] for _ in emitted]
            for index, draft in zip(batch.sample_indices, drafted, strict=True):
                if draft:  # counted as computed once verified (_append_tokens)
                    seq, num_new = plan.scheduled[index]
                    plan.scheduled[index] = (seq, num_new - len(draft))
            self.stats.num_steps += 1
            self.scheduler.on_step_done(plan)
            if self.disk_cache is not None:
                self._save_prompts(plan.scheduled, self.disk_cache)
            for index, tokens, draft in zip(batch.sample_indices, emitted, drafted, strict=True):
                seq = plan.scheduled[index][0]
                outputs.append(self._append_tokens(seq, tokens, len(draft)))
        self._publish_stats()
        return outputs

    def finish(self, request_id: int, reason: str) -> None:
        """Retire a request now (the stepping thread's own decision, e.g. a stop string)."""
        live = self._live.pop(request_id, None)
        if live is not None:
            self.scheduler.finish(live.seq, reason)
            self._publish_stats()

    def fail_all(self) -> list[int]:
        """Retire every request after a failed step; returns their ids."""
        ids = list(self._live)
        for live in self._live.values():
            self.scheduler.finish(live.seq, "abort")
        self._live.clear()
        self._aborted.clear()
        self._publish_stats()
        return ids

    def _drain(self) -> None:
        while True:
            try:
                message = self._inbox.get_nowait()
            except queue.Empty:
                return
            with self._pending_lock:
                self._pending -= 1
            if isinstance(message, _Add):
                seq = Sequence.new(
                    message.request_id, message.prompt_ids, message.params, message.constraint
                )
                self._live[message.request_id] = _Live(seq, message.stop_ids)
                self.scheduler.add(seq)
            else:
                live = self._live.pop(message, None)
                if live is not None:
                    self.scheduler.finish(live.seq, "abort")
                    self._aborted.append(self._output(live.seq, []))

    def _count_admissions(self, scheduled: list[tuple[Sequence, int]]) -> None:
        for seq, _ in scheduled:
            live = self._live[seq.seq_id]
            if not live.admitted:
                live.admitted = True
                self.stats.prefix_cache_queries += seq.num_prompt_tokens
                self.stats.prefix_cache_hits += seq.num_cached_tokens
                self.stats.prompt_tokens += seq.num_prompt_tokens

    def _save_prompts(self, scheduled: list[tuple[Sequence, int]], disk: DiskKVCache) -> None:
        """Queue the full prompt blocks of sequences whose prefill ended this step, if the disk
        lacks them. Only the copy out of the pool happens here; a writer thread writes."""
        bm = self.block_manager
        room = disk.room()
        ids: list[int] = []
        entries: list[tuple[int, list[int]]] = []
        for seq, num_new in scheduled:
            done = seq.num_computed_tokens
            if seq.is_finished or not done - num_new < seq.num_prompt_tokens <= done:
                continue
            for index in range(seq.num_prompt_tokens // self.block_size):
                block_hash = bm.block_hash(seq, index)
                if len(ids) < room and disk.wants(block_hash):
                    ids.append(seq.block_table[index])
                    entries.append((block_hash, seq.block_tokens(index, self.block_size)))
        if ids:
            disk.put(entries, cast(BlockTransfer, self.runner).save_blocks(ids))

    def _propose_drafts(self) -> None:
        """Guess the next tokens of each running sequence that asked for speculation and is
        past its prompt. The drafts follow whatever the step computes for it: the last sampled
        token, or that and the tokens a grammar forced after it (jump-forward)."""
        if not self._speculates:
            return
        for seq in self.scheduler.running:
            seq.draft_ids, seq.draft_forced = [], frozenset()
            want = seq.params.num_speculative_tokens
            if want <= 0 or seq.num_output_tokens == 0:
                continue
            live = self._live[seq.seq_id]
            if live.draft_pause > 0:
                live.draft_pause -= 1
                continue
            # The step emits up to one token more than it drafts.
            space = min(
                seq.params.max_tokens - seq.num_output_tokens - 1,
                self.max_model_len - seq.num_tokens - 1,
            )
            constraint: Any = seq.constraint
            if constraint is None:
                seq.draft_ids = propose_ngram(seq.token_ids, min(want, space))
            else:
                draft = grammar_draft(
                    seq.token_ids, want, space, constraint, self.config.jump_forward
                )
                seq.draft_ids, seq.draft_forced = draft.tokens, draft.forced

    def _append_tokens(self, seq: Sequence, tokens: list[int], num_drafted: int) -> CoreOutput:
        """Append a step's tokens to ``seq``: the drafts the model kept (already computed),
        then the one it sampled; each is checked for the end as a decoded token would be."""
        live = self._live[seq.seq_id]
        constraint: Any = seq.constraint
        reason: str | None = None
        shown = True
        appended: list[int] = []
        for i, token in enumerate(tokens):
            seq.token_ids.append(token)
            appended.append(token)
            self.stats.generation_tokens += 1
            if i < len(tokens) - 1:
                seq.num_computed_tokens += 1  # a kept draft: its keys were written this step
            reason, shown = self._end_of(seq, live, constraint, token)
            if reason is not None:
                break
        if num_drafted:
            # Forced text in a draft is no guess: counted as emitted, not as drafted or kept.
            forced = [j for j in seq.draft_forced if j < num_drafted]
            guessed = num_drafted - len(forced)
            kept = len(tokens) - 1 - sum(j < len(tokens) - 1 for j in forced)
            self.stats.speculation.record(guessed, kept, len(tokens))
            _back_off(live, kept=kept)
            self.block_manager.cache_full_blocks(seq)
            self.block_manager.free_surplus_blocks(seq)
        if reason is None and constraint is not None and self.config.jump_forward:
            room = min(
                seq.params.max_tokens - seq.num_output_tokens, self.max_model_len - seq.num_tokens
            )
            forced = constraint.forced_tokens(room)
            if forced:
                seq.token_ids.extend(forced)
                self.stats.generation_tokens += len(forced)
                appended += forced
                if self._out_of_room(seq):
                    reason = "length"
        if reason is not None:
            self.scheduler.finish(seq, reason)
            del self._live[seq.seq_id]
        output = self._output(seq, appended)
        output.shown = shown
        return output

    def _end_of(
        self, seq: Sequence, live: _Live, constraint: Any, token: int
    ) -> tuple[str | None, bool]:
        """Whether ``token``, just appended, ends ``seq``: (reason or None, whether it is text)."""
        if constraint is not None and not constraint.accept(token):
            return "stop", False  # the sampler broke the grammar: end, emit nothing
        if token in live.stop_ids:
            return "stop", False  # an end token: counted, never shown
        if constraint is not None and constraint.is_terminated():
            return "stop", True
        if self._out_of_room(seq):
            return "length", True
        return None, True

    def _out_of_room(self, seq: Sequence) -> bool:
        return (
            seq.num_output_tokens >= seq.params.max_tokens or seq.num_tokens >= self.max_model_len
        )

    def _output(self, seq: Sequence, tokens: list[int]) -> CoreOutput:
        return CoreOutput(
            seq.seq_id,
            tokens,
            seq.finish_reason if seq.is_finished else None,
            seq.num_prompt_tokens,
            seq.num_cached_tokens,
            seq.num_output_tokens,
        )

    def _publish_stats(self) -> None:
        old = self.stats
        # A new object each time: readers on other threads see one consistent snapshot.
        self.stats = EngineStats(
            num_running=len(self.scheduler.running),
            num_waiting=len(self.scheduler.waiting),
            num_blocks=self.block_manager.num_blocks,
            num_used_blocks=self.block_manager.num_blocks - self.block_manager.num_free_blocks,
            num_preemptions=old.num_preemptions,
            num_steps=old.num_steps,
            prefix_cache_queries=old.prefix_cache_queries,
            prefix_cache_hits=old.prefix_cache_hits,
            prompt_tokens=old.prompt_tokens,
            generation_tokens=old.generation_tokens,
            disk_cache_hits=old.disk_cache_hits,
            speculation=replace(old.speculation),
        )

    def _kv_usage(self, batch: StepBatch) -> float:
        """Token slots holding real tokens over slots in held blocks, after this step."""
        filled: dict[int, int] = {}
        bs = self.block_size
        for seq in self.scheduler.running:
            scheduled_len = seq.num_computed_tokens
            if seq.seq_id in batch.seq_ids:
                scheduled_len = batch.context_lens[batch.seq_ids.index(seq.seq_id)]
            for i, block_id in enumerate(seq.block_table):
                filled[block_id] = max(
                    filled.get(block_id, 0), min(bs, max(0, scheduled_len - i * bs))
                )
        return sum(filled.values()) / (len(filled) * bs) if filled else 0.0


def _max_model_len(runner: Runner, config: EngineConfig) -> int:
    """The most tokens one sequence may hold: what the KV pool holds, the model's context and
    the configured limit, whichever is least."""
    limits = [runner.num_blocks * runner.block_size]
    model_limit = getattr(getattr(runner, "config", None), "max_position", None)
    limits += [n for n in (config.max_model_len, model_limit) if isinstance(n, int) and n > 0]
    return min(limits)


def _back_off(live: _Live, kept: int) -> None:
    """After drafts that all failed, draft again only after 1, 3, 7, then 15 plain steps: where
    the text is new, wrong guesses would cost each step its extra rows; one kept draft resets."""
    if kept:
        live.draft_misses = 0
        return
    live.draft_misses = min(live.draft_misses + 1, MAX_BACK_OFF)
    live.draft_pause = (1 << live.draft_misses) - 1


def _replay_constraint(seq: Sequence) -> None:
    """After a preemption the grammar state starts over and re-accepts the kept tokens."""
    constraint: Any = seq.constraint
    if constraint is not None:
        constraint.reset()
        for token in seq.output_ids:
            constraint.accept(token)
