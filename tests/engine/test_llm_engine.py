"""The step loop over the fake paged runner: exact outputs, stopping, streaming, threads."""

from __future__ import annotations

import random
import threading

import pytest
from fake_runner import EOS, FakeRunner, FakeTokenizer, next_token, reference_generate

from agent.errors import UserError
from backends.engine.core.batch import StepBatch
from backends.engine.core.detokenize import IncrementalDetokenizer, StopStringMatcher
from backends.engine.core.engine_config import EngineConfig
from backends.engine.core.llm_engine import GenerationDelta, GenerationResult, LLMEngine
from backends.engine.core.params import SamplingParams

GREEDY = SamplingParams(temperature=0.0, max_tokens=24)
SEEDED = SamplingParams(temperature=0.8, seed=123, max_tokens=24)


def mixed_prompts(count: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(256) for _ in range(rng.randint(1, 70))] for _ in range(count)]


def run_alone(prompt: list[int], params: SamplingParams) -> list[int]:
    engine = LLMEngine(FakeRunner(num_blocks=64, block_size=4))
    return engine.generate([prompt], params)[0].token_ids


@pytest.mark.parametrize("params", [GREEDY, SEEDED], ids=["greedy", "seeded"])
def test_same_tokens_alone_batched_preempted_and_cached(params: SamplingParams) -> None:
    prompts = mixed_prompts(32)
    expected = [reference_generate(p, params) for p in prompts]
    assert [run_alone(p, params) for p in prompts[:4]] == expected[:4]

    runner = FakeRunner(num_blocks=1024, block_size=4)
    roomy = LLMEngine(runner, EngineConfig(max_num_batched_tokens=64))
    assert [r.token_ids for r in roomy.generate(prompts, params)] == expected
    assert max(len(b.seq_ids) for b in runner.batches) > 8  # really batched
    # Warm cache: the same prompts again are mostly served from the prefix cache.
    computed_before = runner.tokens_computed
    warm = roomy.generate(prompts, params)
    assert [r.token_ids for r in warm] == expected
    assert sum(r.cached_tokens for r in warm) > 0.8 * sum(len(p) for p in prompts)
    assert runner.tokens_computed - computed_before < computed_before / 2

    tight = LLMEngine(
        FakeRunner(num_blocks=40, block_size=4), EngineConfig(max_num_batched_tokens=32)
    )
    assert [r.token_ids for r in tight.generate(prompts, params)] == expected
    assert tight.num_preemptions > 0
    assert tight.block_manager.num_free_blocks == 40


def test_preemption_happens_and_changes_nothing() -> None:
    prompts = mixed_prompts(12, seed=1)
    engine = LLMEngine(FakeRunner(num_blocks=30, block_size=4))
    preempted = 0
    ids = [engine.add_request(p, SEEDED) for p in prompts]
    results: dict[int, GenerationResult] = {}
    while engine.has_unfinished():
        preempted += sum(1 for s in engine.scheduler.running if s.num_preemptions)
        for out in engine.step():
            if out.result is not None:
                results[out.request_id] = out.result
    assert preempted > 0
    assert [results[i].token_ids for i in ids] == [reference_generate(p, SEEDED) for p in prompts]


def test_end_token_and_stop_ids_stop_generation() -> None:
    runner = FakeRunner(num_blocks=256, block_size=4, eos_every=5)
    engine = LLMEngine(runner)
    prompts = mixed_prompts(8, seed=2)
    params = SamplingParams(temperature=0.0, max_tokens=40)
    for prompt, result in zip(prompts, engine.generate(prompts, params), strict=True):
        expected = reference_generate(prompt, params, eos_every=5)
        assert result.token_ids == expected
        assert result.finish_reason == ("stop" if expected[-1] == EOS else "length")
        assert "\ufffd" not in result.text and len(result.text) == len(expected) - (
            expected[-1] == EOS
        )
    ignoring = SamplingParams(temperature=0.0, max_tokens=40, ignore_eos=True)
    assert all(len(r.token_ids) == 40 for r in engine.generate(prompts, ignoring))
    # A stop id: the third generated token of the first prompt.
    third = reference_generate(prompts[0], ignoring)[2]
    stop_at = SamplingParams(
        temperature=0.0, max_tokens=40, stop_token_ids=[third], ignore_eos=True
    )
    (result,) = engine.generate(prompts[:1], stop_at)
    first_hit = reference_generate(prompts[0], ignoring).index(third)
    assert len(result.token_ids) == first_hit + 1 and result.finish_reason == "stop"


def test_stop_string_cuts_the_text_and_is_never_streamed() -> None:
    prompt = [1, 2, 3]
    full = FakeTokenizer().decode(reference_generate(prompt, GREEDY))
    stop = full[6:9]
    engine = LLMEngine(FakeRunner(num_blocks=64, block_size=4))
    params = SamplingParams(temperature=0.0, max_tokens=24, stop_strings=["never", stop])
    pieces, result = [], None
    for item in engine.submit(prompt, params):
        if isinstance(item, GenerationDelta):
            pieces.append(item.text)
        else:
            result = item
    engine.close()
    assert result is not None and result.finish_reason == "stop"
    assert result.text == "".join(pieces) == full[: full.index(stop)]


def test_max_tokens_gives_length_and_usage() -> None:
    engine = LLMEngine(FakeRunner(num_blocks=64, block_size=4))
    (result,) = engine.generate([[5] * 10], SamplingParams(temperature=0.0, max_tokens=7))
    assert (result.finish_reason, result.prompt_tokens, result.completion_tokens) == (
        "length",
        10,
        7,
    )


class CountingConstraint:
    """Terminates after ``limit`` accepted tokens; records resets."""

    def __init__(self, limit: int) -> None:
        self.limit, self.accepted, self.resets = limit, 0, 0

    def accept(self, token_id: int) -> bool:
        self.accepted += 1
        return True

    def is_terminated(self) -> bool:
        return self.accepted >= self.limit

    def reset(self) -> None:
        self.resets += 1
        self.accepted = 0

    def forced_tokens(self, limit: int) -> list[int]:
        return []


def test_constraint_termination_and_replay_after_preemption() -> None:
    engine = LLMEngine(FakeRunner(num_blocks=64, block_size=4))
    constraint = CountingConstraint(limit=9)
    request_id = engine.add_request([4, 5, 6], GREEDY, constraint)
    results = []
    for _ in range(5):
        results += engine.step()
    assert engine.scheduler.preempt_newest() is not None
    while engine.has_unfinished():
        results += engine.step()
    final = [o.result for o in results if o.result is not None and o.request_id == request_id]
    assert final[0].finish_reason == "stop" and final[0].completion_tokens == 9
    assert constraint.resets == 1 and constraint.accepted == 9
    assert final[0].token_ids == reference_generate([4, 5, 6], GREEDY)[:9]


class ForcingConstraint(CountingConstraint):
    """After its second accepted token, forces ``forced`` (as a grammar with one way on would)."""

    def __init__(self, forced: list[int], limit: int) -> None:
        super().__init__(limit)
        self.forced = forced

    def forced_tokens(self, limit: int) -> list[int]:
        if self.accepted != 2:
            return []
        out = self.forced[:limit]
        self.accepted += len(out)
        return out


def _run(engine: LLMEngine, request_id: int) -> GenerationResult:
    while True:
        for out in engine.step():
            if out.request_id == request_id and out.result is not None:
                return out.result


def _forced_reference(prompt: list[int], forced: list[int], total: int) -> list[int]:
    """The fake model's output with ``forced`` written after its second token."""
    tokens, out = list(prompt), list[int]()
    while len(out) < total:
        token = next_token(tokens, GREEDY, len(out), 0)
        tokens.append(token)
        out.append(token)
        if len(out) == 2:
            tokens += forced
            out += forced
    return out[:total]


def test_forced_tokens_join_the_output_and_save_steps() -> None:
    runner = FakeRunner(num_blocks=64, block_size=4)
    engine = LLMEngine(runner)
    forced = [70, 71, 72, 73, 74]
    request_id = engine.add_request([4, 5, 6], GREEDY, ForcingConstraint(forced, limit=12))
    result = _run(engine, request_id)
    assert result.token_ids == _forced_reference([4, 5, 6], forced, 12)
    assert result.finish_reason == "stop" and result.completion_tokens == 12
    # 12 tokens, 5 of them forced: 7 forward passes, the forced ones riding in one of them.
    assert len(runner.batches) == 7
    assert max(b.num_tokens for b in runner.batches[1:]) == 1 + len(forced)

    off = LLMEngine(FakeRunner(num_blocks=64, block_size=4), EngineConfig(jump_forward=False))
    plain = _run(off, off.add_request([4, 5, 6], GREEDY, ForcingConstraint(forced, limit=12)))
    assert plain.token_ids == reference_generate([4, 5, 6], GREEDY)[:12]


def test_forced_tokens_stop_at_max_tokens() -> None:
    engine = LLMEngine(FakeRunner(num_blocks=64, block_size=4))
    params = SamplingParams(temperature=0.0, max_tokens=4)
    result = _run(
        engine, engine.add_request([4, 5, 6], params, ForcingConstraint([70, 71, 72], 99))
    )
    assert result.token_ids == _forced_reference([4, 5, 6], [70, 71], 4)
    assert result.finish_reason == "length" and result.completion_tokens == 4


def test_abort_reports_and_frees() -> None:
    engine = LLMEngine(FakeRunner(num_blocks=16, block_size=4))
    request_id = engine.add_request([1] * 20, GREEDY)
    engine.step()
    engine.abort(request_id)
    (out,) = engine.step()
    assert out.result is not None and out.result.finish_reason == "abort"
    assert engine.block_manager.num_free_blocks == 16 and not engine.has_unfinished()


def test_bad_requests_are_user_errors() -> None:
    engine = LLMEngine(FakeRunner(num_blocks=4, block_size=4))
    with pytest.raises(UserError, match="empty"):
        engine.add_request([], GREEDY)
    with pytest.raises(UserError, match="16 tokens but the engine holds at most 16"):
        engine.add_request([1] * 16, GREEDY)
    with pytest.raises(UserError, match="top_p"):
        engine.add_request([1], SamplingParams(top_p=0.0))


def test_sequence_hitting_the_cache_capacity_ends_with_length() -> None:
    engine = LLMEngine(FakeRunner(num_blocks=4, block_size=4))
    (result,) = engine.generate([[3] * 10], SamplingParams(temperature=0.0, max_tokens=100))
    assert result.finish_reason == "length" and result.completion_tokens == 6


def test_threads_share_forward_passes_and_get_exact_tokens() -> None:
    runner = FakeRunner(num_blocks=512, block_size=4, delay=0.002)
    engine = LLMEngine(runner)
    prompts = mixed_prompts(16, seed=3)
    results: dict[int, list[int]] = {}
    texts: dict[int, str] = {}
    start = threading.Barrier(len(prompts))

    def client(i: int) -> None:
        start.wait()
        tokens, text = [], []
        for item in engine.submit(prompts[i], SEEDED):
            if isinstance(item, GenerationDelta):
                tokens += item.token_ids
                text.append(item.text)
            else:
                assert item.token_ids == tokens and item.text == "".join(text)
        results[i], texts[i] = tokens, "".join(text)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    engine.close()
    assert results == {i: reference_generate(p, SEEDED) for i, p in enumerate(prompts)}
    assert max(len(b.sample_indices) for b in runner.batches) > 4
    assert engine.block_manager.num_free_blocks == 512


def test_closing_a_stream_aborts_the_request() -> None:
    engine = LLMEngine(FakeRunner(num_blocks=64, block_size=4))
    stream = engine.submit([1, 2, 3], SamplingParams(temperature=0.0, max_tokens=200))
    next(stream)
    stream.close()
    for _ in range(100):
        if not engine.has_unfinished():
            break
        threading.Event().wait(0.01)
    assert not engine.has_unfinished() and engine.block_manager.num_free_blocks == 64
    engine.close()


class BrokenRunner(FakeRunner):
    def execute(self, batch: StepBatch) -> list[int]:
        if len(self.batches) == 2:
            self.batches.append(batch)
            raise RuntimeError("device lost")
        return super().execute(batch)


def test_a_failing_step_fails_its_streams_not_the_engine() -> None:
    engine = LLMEngine(BrokenRunner(num_blocks=64, block_size=4))
    with pytest.raises(RuntimeError, match="device lost"):
        list(engine.submit([1, 2, 3], GREEDY))
    assert engine.block_manager.num_free_blocks == 64
    items = list(engine.submit([1, 2, 3], GREEDY))
    assert isinstance(items[-1], GenerationResult) and items[-1].finish_reason == "length"
    engine.close()


def test_incremental_detokenizer_never_emits_broken_utf8() -> None:
    tokenizer = FakeTokenizer()
    text = "héllo, 世界 🙂!"
    detok = IncrementalDetokenizer(tokenizer, tokenizer.encode("prompt "))
    pieces = [detok.add(b) for b in tokenizer.encode(text)]
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)
    assert pieces[-5:] == ["", "", "", "🙂", "!"]  # the emoji's first three bytes are held back


def test_stop_matcher_holds_back_possible_prefixes() -> None:
    matcher = StopStringMatcher(["</tool_call>"])
    assert matcher.feed("abc</to") == ("abc", False)
    assert matcher.feed("ol") == ("", False)
    assert matcher.feed("_call> tail") == ("", True)
    assert matcher.text == "abc"
    other = StopStringMatcher(["END"])
    assert other.feed("xE") == ("x", False)
    assert other.feed("x") == ("Ex", False)
    assert other.flush() == ""


@pytest.mark.slow
def test_real_model_greedy_tokens_do_not_depend_on_batching_preemption_or_cache() -> None:
    pytest.importorskip("torch")
    from backends.engine.model.model_runner import ModelRunner
    from backends.gguf.default_model import default_model_path

    try:
        path = default_model_path()
    except UserError:
        pytest.skip("the bundled model is not installed")
    rng = random.Random(0)
    prompts = [[rng.randrange(100, 32000) for _ in range(rng.randint(20, 64))] for _ in range(12)]
    params = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    per_token = 2 * 30 * 3 * 64 * 4  # float32 KV of the bundled model
    runner = ModelRunner(EngineConfig(path, kv_cache_bytes=20 * 16 * per_token))
    try:
        single = LLMEngine(runner)
        alone = [single.generate([p], params)[0].token_ids for p in prompts[:3]]
        warm = single.generate(prompts[:3], params)  # together now, and from the prefix cache
        assert all(r.cached_tokens >= 16 for r in warm)  # every prompt is over 16 tokens long
        engine = LLMEngine(runner)  # 20 blocks of 16 for 12 sequences: preemption is certain
        batched = [r.token_ids for r in engine.generate(prompts, params)]
        assert engine.num_preemptions > 0
    finally:
        runner.close()
    assert batched[:3] == alone
    assert [r.token_ids for r in warm] == alone
