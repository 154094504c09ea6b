"""From the engine's step thread to the server's event loop, one request at a time.

The step thread only hands each core output over (``call_soon_threadsafe``); the event loop
detokenizes it, matches stop strings and records latencies, so none of that touches the
forward pass. Leaving the iterator early (a client that disconnected, a cancelled task)
aborts the request, which frees its blocks before the next step.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from backends.engine.core.engine_core import CoreOutput
from backends.engine.core.llm_engine import GenerationDelta, GenerationResult, LLMEngine
from backends.engine.core.params import SamplingParams
from backends.engine.serve.metrics import ServerMetrics


class EngineFailed(Exception):
    """A step failed while this request ran (not the client's fault); the engine carries on."""


async def generate(
    engine: LLMEngine,
    prompt_ids: list[int],
    params: SamplingParams,
    constraint: Any,
    metrics: ServerMetrics,
    started: float,
) -> AsyncIterator[GenerationDelta | GenerationResult]:
    """Stream one request: deltas with tokens, then one result."""
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[CoreOutput | BaseException] = asyncio.Queue()

    def sink(item: CoreOutput | BaseException) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting
            loop.call_soon_threadsafe(inbox.put_nowait, item)

    request_id, processor = engine.submit_to(prompt_ids, params, constraint, sink)
    done = False
    last: float | None = None
    try:
        while not done:
            item = await inbox.get()
            if isinstance(item, BaseException):
                done = True
                raise EngineFailed(f"the engine failed while generating: {item}") from item
            out = processor.process(item)
            if processor.stopped_early(item):
                engine.abort(request_id)
            if out.delta.token_ids:
                now = time.perf_counter()
                if last is None:
                    metrics.first_token(now - started)
                else:
                    metrics.next_token(now - last)
                last = now
                yield out.delta
            if out.result is not None:
                done = True
                metrics.request_done(out.result.finish_reason, time.perf_counter() - started)
                yield out.result
    finally:
        if not done:
            engine.abort(request_id)
