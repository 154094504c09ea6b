"""The engine's front end: requests in, text deltas and results out, over one engine core.

:class:`LLMEngine` can be driven synchronously (``add_request`` / ``step`` / ``abort``, for tests
and benchmarks) or served: :meth:`LLMEngine.submit` (a blocking iterator, any thread) and
:meth:`LLMEngine.submit_to` (a callback, for an event loop) start one background thread that runs
core steps while there is work. Many callers share every forward pass (continuous batching across
conversations). Neither submitting nor aborting ever waits for a step: both go through the core's
inbox. Detokenizing and stop strings run in the caller's thread (``backends.engine.core.output``),
off the step loop. Do not call ``step`` yourself once a request was submitted.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

from agent.errors import UserError
from backends.engine.core.block_manager import BlockManager
from backends.engine.core.engine_config import EngineConfig
from backends.engine.core.engine_core import CoreOutput, EngineCore, EngineStats, Runner, _Add
from backends.engine.core.output import (
    GenerationDelta,
    GenerationResult,
    OutputProcessor,
    RequestOutput,
)
from backends.engine.core.params import SamplingParams
from backends.engine.core.scheduler import Scheduler

if TYPE_CHECKING:
    from backends.engine.core.disk_cache import DiskKVCache

__all__ = [
    "GenerationDelta",
    "GenerationResult",
    "LLMEngine",
    "RequestOutput",
    "Runner",
]

Sink = Callable[[CoreOutput | BaseException], None]


class LLMEngine:
    """Continuous batching over a paged, prefix-cached KV cache."""

    def __init__(
        self,
        runner: Runner,
        config: EngineConfig | None = None,
        *,
        disk_cache: DiskKVCache | None = None,
    ) -> None:
        """Batch over ``runner`` as ``config`` says (unset: the defaults); ``disk_cache`` keeps
        full prompt blocks across processes (needs prefix caching)."""
        self.runner = runner
        self.tokenizer = runner.tokenizer
        self.block_size = runner.block_size
        self.core = EngineCore(runner, config or EngineConfig(), disk_cache)
        self._ids = itertools.count()
        self._processors: dict[int, OutputProcessor] = {}  # synchronous mode only
        self._sinks: dict[int, Sink] = {}  # served mode: where each request's outputs go
        self._sinks_lock = threading.Lock()  # never held across a step
        self._wake = threading.Event()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    # --- what the core holds, for tests, benchmarks and metrics --------------------------------

    @property
    def config(self) -> EngineConfig:
        return self.core.config

    @property
    def max_model_len(self) -> int:
        """The most tokens one sequence may hold: the KV cache's, the model's and the config's
        limits, whichever is least."""
        return self.core.max_model_len

    @property
    def scheduler(self) -> Scheduler:
        return self.core.scheduler

    @property
    def block_manager(self) -> BlockManager:
        return self.core.block_manager

    @property
    def stats(self) -> EngineStats:
        """The latest snapshot of the core's counters (safe to read from any thread)."""
        return self.core.stats

    @property
    def kv_usage(self) -> list[float]:
        return self.core.kv_usage

    @property
    def num_steps(self) -> int:
        return self.core.stats.num_steps

    @property
    def num_preemptions(self) -> int:
        return self.core.stats.num_preemptions

    # --- synchronous API -------------------------------------------------------------------------

    def add_request(
        self, prompt_ids: list[int], params: SamplingParams, constraint: object | None = None
    ) -> int:
        """Queue a request; it joins the batch at the next step. Returns its id."""
        request_id, processor = self._prepare(prompt_ids, params)
        self._processors[request_id] = processor
        self.core.add(self._message(request_id, prompt_ids, params, constraint))
        return request_id

    def abort(self, request_id: int) -> None:
        """Stop a request: it is retired and its blocks freed before the next step plans.

        Its result (reason "abort") comes with that step's outputs. Never waits for a step.
        """
        self.core.abort(request_id)
        self._wake.set()

    def has_unfinished(self) -> bool:
        """True while a request is queued or running or a result is still to be reported."""
        return self.core.has_unfinished()

    def step(self) -> list[RequestOutput]:
        """Run one step: every running sequence advances by its scheduled tokens."""
        outputs = []
        for out in self.core.step():
            processor = self._processors.get(out.request_id)
            if processor is None:
                continue
            output = processor.process(out)
            if output.result is not None:
                del self._processors[out.request_id]
                if processor.stopped_early(out):
                    self.core.finish(out.request_id, "stop")
            outputs.append(output)
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

    # --- served API ------------------------------------------------------------------------------

    def submit(
        self, prompt_ids: list[int], params: SamplingParams, constraint: object | None = None
    ) -> Generator[GenerationDelta | GenerationResult, None, None]:
        """Queue a request and stream it: deltas, then one :class:`GenerationResult`. Thread-safe.

        Closing the iterator early aborts the request.
        """
        stream: queue.SimpleQueue[CoreOutput | BaseException] = queue.SimpleQueue()
        request_id, processor = self.submit_to(prompt_ids, params, constraint, stream.put)
        return self._read(request_id, processor, stream)

    def submit_to(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        constraint: object | None,
        sink: Sink,
    ) -> tuple[int, OutputProcessor]:
        """Queue a request whose core outputs (or the exception of a failed step) go to ``sink``.

        ``sink`` is called on the step thread and must only hand the item over (put it in a
        queue, or schedule it on an event loop). Feed each item to the returned processor; when
        :meth:`OutputProcessor.stopped_early` says so, :meth:`abort` the request.
        """
        if self._closed:
            raise RuntimeError("the engine is closed")
        request_id, processor = self._prepare(prompt_ids, params)
        with self._sinks_lock:
            self._sinks[request_id] = sink
        self.core.add(self._message(request_id, prompt_ids, params, constraint))
        self._start()
        self._wake.set()
        return request_id, processor

    def _prepare(
        self, prompt_ids: list[int], params: SamplingParams
    ) -> tuple[int, OutputProcessor]:
        params.check()
        if not prompt_ids:
            raise UserError("the prompt is empty: send at least one message")
        if len(prompt_ids) >= self.max_model_len:
            raise UserError(
                f"the prompt has {len(prompt_ids)} tokens but the engine holds at most"
                f" {self.max_model_len}: shorten the conversation or give the engine more KV memory"
            )
        request_id = next(self._ids)
        return request_id, OutputProcessor(
            request_id, self.tokenizer, prompt_ids, params.stop_strings
        )

    def _message(
        self, request_id: int, prompt_ids: list[int], params: SamplingParams, constraint: object
    ) -> _Add:
        eos = [] if params.ignore_eos else list(getattr(self.tokenizer, "eos_token_ids", []) or [])
        stop_ids = frozenset([*eos, *params.stop_token_ids])
        return _Add(request_id, list(prompt_ids), params, constraint, stop_ids)

    def _read(
        self,
        request_id: int,
        processor: OutputProcessor,
        stream: queue.SimpleQueue[CoreOutput | BaseException],
    ) -> Generator[GenerationDelta | GenerationResult, None, None]:
        done = False
        try:
            while not done:
                item = stream.get()
                if isinstance(item, BaseException):
                    done = True
                    raise item
                out = processor.process(item)
                if processor.stopped_early(item):
                    self.abort(request_id)
                if out.delta.token_ids:
                    yield out.delta
                if out.result is not None:
                    done = True
                    yield out.result
        finally:
            if not done:
                self.abort(request_id)

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="clawloop-engine", daemon=True
                )
                self._thread.start()

    def _serve(self) -> None:
        """The step loop: step while there is work, sleep otherwise."""
        while True:
            self._wake.clear()
            if not self.core.has_unfinished():
                if self._closed:
                    return
                self._wake.wait()
                continue
            try:
                outputs = self.core.step()
            except Exception as exc:  # a failing step fails its requests, not the server
                for request_id in self.core.fail_all():
                    self._dispatch_error(request_id, exc)
                continue
            for out in outputs:
                self._dispatch(out)

    def _dispatch(self, out: CoreOutput) -> None:
        with self._sinks_lock:
            sink = self._sinks.get(out.request_id)
            if out.finish_reason is not None:
                self._sinks.pop(out.request_id, None)
        if sink is not None:
            try:
                sink(out)
            except Exception:  # a consumer that went away must not stop the loop
                with self._sinks_lock:
                    self._sinks.pop(out.request_id, None)
                self.core.abort(out.request_id)

    def _dispatch_error(self, request_id: int, exc: Exception) -> None:
        with self._sinks_lock:
            sink = self._sinks.pop(request_id, None)
        if sink is not None:
            with contextlib.suppress(Exception):  # nobody is listening any more
                sink(exc)

    def close(self) -> None:
        """Abort everything and stop the background thread."""
        self._closed = True
        with self._sinks_lock:
            live = list(self._sinks)
        for request_id in [*live, *self._processors]:
            self.core.abort(request_id)
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=60)
        if self.core.disk_cache is not None:
            self.core.disk_cache.close()
