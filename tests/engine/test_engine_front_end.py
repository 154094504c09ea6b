"""The step loop apart from its front end: submit and abort never wait for a forward pass."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from fake_runner import FakeRunner, reference_generate

from agent.errors import ConfigError
from backends.engine.backend import engine_config
from backends.engine.config import EngineSettings
from backends.engine.core.batch import StepBatch
from backends.engine.core.llm_engine import GenerationResult, LLMEngine
from backends.engine.core.params import SamplingParams


class GatedRunner(FakeRunner):
    """Holds each forward pass until the test opens the gate, so a step is surely in flight."""

    def __init__(self, **kwargs: int) -> None:
        super().__init__(**kwargs)
        self.in_step = threading.Event()
        self.gate = threading.Event()

    def execute(self, batch: StepBatch) -> list[int]:
        self.in_step.set()
        self.gate.wait(timeout=30)
        return super().execute(batch)


def test_submit_and_abort_return_while_a_step_is_running() -> None:
    runner = GatedRunner(num_blocks=64, block_size=4)
    engine = LLMEngine(runner)
    params = SamplingParams(temperature=0.0, max_tokens=5)
    first = engine.submit([1, 2, 3], params)
    assert runner.in_step.wait(timeout=10)  # the loop thread is inside execute() now
    started = time.perf_counter()
    second = engine.submit([4, 5, 6], params)
    engine.abort(10_000)  # an unknown id is ignored, and also does not wait
    waited = time.perf_counter() - started
    runner.gate.set()
    results = [list(first)[-1], list(second)[-1]]
    engine.close()
    assert waited < 0.5  # the gate stayed shut meanwhile: neither call waited for the step
    assert [r.token_ids for r in results if isinstance(r, GenerationResult)] == [
        reference_generate([1, 2, 3], params),
        reference_generate([4, 5, 6], params),
    ]
    assert engine.block_manager.num_free_blocks == 64


def test_a_stop_string_in_a_stream_aborts_the_request_in_the_core() -> None:
    engine = LLMEngine(FakeRunner(num_blocks=64, block_size=4, delay=0.002))
    full = reference_generate([7, 8, 9], SamplingParams(temperature=0.0, max_tokens=200))
    text = bytes(full).decode()
    stop = text[3:6]
    params = SamplingParams(temperature=0.0, max_tokens=200, stop_strings=[stop])
    items = list(engine.submit([7, 8, 9], params))
    result = items[-1]
    assert isinstance(result, GenerationResult)
    assert result.finish_reason == "stop" and result.text == text[: text.index(stop)]
    for _ in range(200):
        if not engine.has_unfinished():
            break
        time.sleep(0.01)
    assert engine.block_manager.num_free_blocks == 64  # the core dropped it, not ran to 200
    assert engine.stats.generation_tokens < 50
    engine.close()


def test_stats_count_tokens_prefix_hits_and_blocks() -> None:
    engine = LLMEngine(FakeRunner(num_blocks=64, block_size=4))
    params = SamplingParams(temperature=0.0, max_tokens=4)
    engine.generate([[1] * 17], params)
    engine.generate([[1] * 17], params)
    stats = engine.stats
    assert stats.prompt_tokens == 34 and stats.generation_tokens == 8
    assert stats.prefix_cache_queries == 34 and stats.prefix_cache_hits == 16
    assert stats.num_used_blocks == 0 and stats.kv_cache_usage == 0.0


def test_every_engine_knob_is_a_validated_setting(tmp_path: Path) -> None:
    settings = EngineSettings.from_options(
        {"max_num_seqs": "8", "block_size": 32, "enable_prefix_caching": False, "base_url": "x"}
    )
    config = engine_config(settings, tmp_path / "model.gguf", None, "cpu")
    assert config.max_num_seqs == 8 and config.block_size == 32
    assert config.enable_prefix_caching is False
    with pytest.raises(ConfigError, match="max_num_seqs"):
        EngineSettings.from_options({"max_num_seqs": 0})
    runner = FakeRunner(num_blocks=64, block_size=4)
    engine = LLMEngine(runner, replace(config, max_num_seqs=2))
    engine.generate([[1, 2], [3, 4], [5, 6]], SamplingParams(temperature=0.0, max_tokens=3))
    assert max(len(b.seq_ids) for b in runner.batches) == 2
