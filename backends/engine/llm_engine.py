"""The step loop: schedule, run the model once for every scheduled token, sample, stop, stream.

:class:`LLMEngine` is synchronous at heart (``add_request`` / ``step`` / ``abort``). For serving,
:meth:`LLMEngine.submit` starts one background thread that runs steps while there is work; many
threads can submit at once and their requests share every forward pass (continuous batching
across conversations). Do not call ``step`` yourself once ``submit`` has been used.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.errors import UserError
from backends.engine.batch import StepBatch, build_step_batch
from backends.engine.block_manager import BlockManager
from backends.engine.detokenize import IncrementalDetokenizer, StopStringMatcher
from backends.engine.params import SamplingParams
from backends.engine.scheduler import Scheduler
from backends.engine.sequence import Sequence


class Runner(Protocol):
    """What the engine needs from a model runner (``ModelRunner`` or a test double)."""

    num_blocks: int
    block_size: int
    tokenizer: Any  # .decode(ids) -> str and .eos_token_ids

    def execute(self, batch: StepBatch) -> list[int]: ...


@dataclass(slots=True)
class GenerationDelta:
    """New tokens of one request and the text they completed (may be empty)."""

    token_ids: list[int]
    text: str


@dataclass(slots=True)
class GenerationResult:
    """How a request ended, sent once, last."""

    request_id: int
    finish_reason: str  # "stop", "length" or "abort"
    prompt_tokens: int
    cached_tokens: int  # prompt tokens served from the prefix cache
    completion_tokens: int
    token_ids: list[int] = field(default_factory=list)  # every generated token
    text: str = ""  # the whole text, cut before a stop string


@dataclass(slots=True)
class RequestOutput:
    """What one step produced for one request: a delta, and the result if it finished."""

    request_id: int
    delta: GenerationDelta
    result: GenerationResult | None = None

    @property
    def finished(self) -> bool:
        return self.result is not None


@dataclass(slots=True)
class _Request:
    seq: Sequence
    detokenizer: IncrementalDetokenizer
    stops: StopStringMatcher
    stop_ids: frozenset[int]
    text: list[str] = field(default_factory=list)


class LLMEngine:
    """Continuous batching over a paged, prefix-cached KV cache."""

    def __init__(
        self,
        runner: Runner,
        *,
        max_num_seqs: int = 64,
        max_num_batched_tokens: int = 2048,
        enable_prefix_caching: bool = True,
        long_prefill_token_threshold: int = 0,
        max_model_len: int | None = None,
        record_kv_usage: bool = False,
    ) -> None:
        self.runner = runner
        self.tokenizer = runner.tokenizer
        self.block_size = runner.block_size
        self.block_manager = BlockManager(
            runner.num_blocks, runner.block_size, enable_prefix_caching
        )
        self.scheduler = Scheduler(
            self.block_manager, max_num_seqs, max_num_batched_tokens, long_prefill_token_threshold
        )
        limits = [runner.num_blocks * runner.block_size]
        config_limit = getattr(getattr(runner, "config", None), "max_position", None)
        limits += [n for n in (max_model_len, config_limit) if isinstance(n, int) and n > 0]
        self.max_model_len = min(limits)
        self.record_kv_usage = record_kv_usage
        self.kv_usage: list[
            float
        ] = []  # per step: token slots holding tokens / slots in held blocks
        self.num_steps = 0
        self.num_preemptions = 0
        self._requests: dict[int, _Request] = {}
        self._finished: list[RequestOutput] = []  # aborted requests, reported by the next step
        self._ids = itertools.count()
        self._lock = threading.RLock()
        self._work = threading.Condition(self._lock)
        self._streams: dict[
            int, queue.SimpleQueue[GenerationDelta | GenerationResult | BaseException]
        ] = {}
        self._thread: threading.Thread | None = None
        self._closed = False

    # --- synchronous API -------------------------------------------------------------------------

    def add_request(
        self, prompt_ids: list[int], params: SamplingParams, constraint: object | None = None
    ) -> int:
        """Queue a request; it joins the batch at the next step. Returns its id."""
        params.check()
        if not prompt_ids:
            raise UserError("the prompt is empty: send at least one message")
        if len(prompt_ids) >= self.max_model_len:
            raise UserError(
                f"the prompt has {len(prompt_ids)} tokens but the engine holds at most"
                f" {self.max_model_len}: shorten the conversation or give the engine more KV memory"
            )
        eos = [] if params.ignore_eos else list(getattr(self.tokenizer, "eos_token_ids", []) or [])
        with self._work:
            request_id = next(self._ids)
            seq = Sequence.new(request_id, prompt_ids, params, constraint)
            self._requests[request_id] = _Request(
                seq,
                IncrementalDetokenizer(self.tokenizer, seq.token_ids),
                StopStringMatcher(params.stop_strings),
                frozenset([*eos, *params.stop_token_ids]),
            )
            self.scheduler.add(seq)
            self._work.notify_all()
        return request_id

    def abort(self, request_id: int) -> None:
        """Stop a request now: its blocks are freed; its result (reason "abort") comes next step."""
        with self._work:
            request = self._requests.pop(request_id, None)
            if request is None:
                return
            self.scheduler.finish(request.seq, "abort")
            self._finished.append(
                RequestOutput(request_id, GenerationDelta([], ""), self._result(request))
            )
            self._work.notify_all()

    def has_unfinished(self) -> bool:
        """True while a request is queued or running or a result is still to be reported."""
        with self._lock:
            return self.scheduler.has_unfinished() or bool(self._finished)

    def step(self) -> list[RequestOutput]:
        """Run one step: every running sequence advances by its scheduled tokens."""
        with self._lock:
            outputs, self._finished = self._finished, []
            plan = self.scheduler.schedule()
            self.num_preemptions += len(plan.preempted)
            for seq in plan.preempted:
                self._replay_constraint(seq)
            if not plan:
                return outputs
            batch = build_step_batch(plan.scheduled, self.block_size)
            if self.record_kv_usage:
                self.kv_usage.append(self._kv_usage(batch))
            sampled = self.runner.execute(batch)
            if len(sampled) != len(batch.sample_indices):
                raise RuntimeError(
                    f"runner gave {len(sampled)} tokens for {len(batch.sample_indices)} sequences"
                )
            self.num_steps += 1
            self.scheduler.on_step_done(plan)
            for index, token in zip(batch.sample_indices, sampled, strict=True):
                outputs.append(self._append_token(plan.scheduled[index][0], int(token)))
            return outputs

    def generate(
        self, prompts: list[list[int]], params: SamplingParams | list[SamplingParams]
    ) -> list[GenerationResult]:
        """Run ``prompts`` to completion together (synchronous; for tests and benchmarks)."""
        each = params if isinstance(params, list) else [params] * len(prompts)
        ids = [self.add_request(p, sp) for p, sp in zip(prompts, each, strict=True)]
        results: dict[int, GenerationResult] = {}
        while len(results) < len(ids):
            for out in self.step():
                if out.result is not None:
                    results[out.request_id] = out.result
        return [results[i] for i in ids]

    # --- one sampled token -----------------------------------------------------------------------

    def _append_token(self, seq: Sequence, token: int) -> RequestOutput:
        request = self._requests[seq.seq_id]
        constraint: Any = seq.constraint
        seq.token_ids.append(token)
        reason: str | None = None
        text = ""
        if constraint is not None and not constraint.accept(token):
            reason = "stop"  # the sampler broke the grammar: end rather than emit invalid output
        elif token in request.stop_ids:
            reason = "stop"  # an end token: counted, never shown
        else:
            text, hit = request.stops.feed(request.detokenizer.add(token))
            if hit or (constraint is not None and constraint.is_terminated()):
                reason = "stop"
        if reason is None and seq.num_output_tokens >= seq.params.max_tokens:
            reason = "length"
        if reason is None and seq.num_tokens >= self.max_model_len:
            reason = "length"
        if reason is not None:
            text += request.stops.flush()
        request.text.append(text)
        output = RequestOutput(seq.seq_id, GenerationDelta([token], text))
        if reason is not None:
            self.scheduler.finish(seq, reason)
            del self._requests[seq.seq_id]
            output.result = self._result(request)
        return output

    def _result(self, request: _Request) -> GenerationResult:
        seq = request.seq
        return GenerationResult(
            seq.seq_id,
            seq.finish_reason or "abort",
            seq.num_prompt_tokens,
            seq.num_cached_tokens,
            seq.num_output_tokens,
            seq.output_ids,
            "".join(request.text),
        )

    def _replay_constraint(self, seq: Sequence) -> None:
        """After a preemption the grammar state starts over and re-accepts the kept tokens."""
        constraint: Any = seq.constraint
        if constraint is not None:
            constraint.reset()
            for token in seq.output_ids:
                constraint.accept(token)

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

    # --- streaming front end ---------------------------------------------------------------------

    def submit(
        self, prompt_ids: list[int], params: SamplingParams, constraint: object | None = None
    ) -> Generator[GenerationDelta | GenerationResult, None, None]:
        """Queue a request and stream it: deltas, then one :class:`GenerationResult`. Thread-safe.

        Closing the iterator early aborts the request.
        """
        stream: queue.SimpleQueue[GenerationDelta | GenerationResult | BaseException] = (
            queue.SimpleQueue()
        )
        with self._work:
            if self._closed:
                raise RuntimeError("the engine is closed")
            request_id = self.add_request(prompt_ids, params, constraint)
            self._streams[request_id] = stream
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="clawloop-engine", daemon=True
                )
                self._thread.start()
        return self._read(request_id, stream)

    def _read(
        self,
        request_id: int,
        stream: queue.SimpleQueue[GenerationDelta | GenerationResult | BaseException],
    ) -> Generator[GenerationDelta | GenerationResult, None, None]:
        done = False
        try:
            while not done:
                item = stream.get()
                if isinstance(item, BaseException):
                    done = True
                    raise item
                done = isinstance(item, GenerationResult)
                yield item
        finally:
            if not done:
                self.abort(request_id)

    def _serve(self) -> None:
        """The background loop: step while there is work, sleep otherwise."""
        while True:
            with self._work:
                while not self._closed and not (self.scheduler.has_unfinished() or self._finished):
                    self._work.wait()
                if self._closed:
                    return
                try:
                    outputs = self.step()
                except Exception as exc:  # a failing step fails its requests, not the server
                    self._fail_all(exc)
                    continue
                for out in outputs:
                    self._dispatch(out)

    def _dispatch(self, out: RequestOutput) -> None:
        stream = self._streams.get(out.request_id)
        if stream is None:
            return
        if out.delta.token_ids:
            stream.put(out.delta)
        if out.result is not None:
            stream.put(out.result)
            del self._streams[out.request_id]

    def _fail_all(self, exc: Exception) -> None:
        for seq in self.scheduler.live_sequences():
            self.scheduler.finish(seq, "abort")
            self._requests.pop(seq.seq_id, None)
        self._finished.clear()
        for stream in self._streams.values():
            stream.put(exc)
        self._streams.clear()

    def close(self) -> None:
        """Abort everything and stop the background thread."""
        with self._work:
            self._closed = True
            for request_id in list(self._requests):
                self.abort(request_id)
            for out in self._finished:
                self._dispatch(out)
            self._finished.clear()
            self._work.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=60)
