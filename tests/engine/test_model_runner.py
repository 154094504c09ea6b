"""ModelRunner on the bundled model: chunking, batching and prefix reuse give the same results."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from backends.engine.core.engine_config import EngineConfig
from backends.engine.model.model_runner import ModelRunner
from backends.engine.weights.quant import DualLinear
from backends.gguf.default_model import default_model_path

try:
    from backends.engine.core.batch import StepBatch
    from backends.engine.core.params import SamplingParams
except ImportError:  # the scheduler side may not be installed: same fields as the engine contract

    @dataclass(slots=True)
    class SamplingParams:  # type: ignore[no-redef]
        temperature: float = 1.0
        top_k: int = 0
        top_p: float = 1.0
        min_p: float = 0.0
        seed: int | None = None
        max_tokens: int = 256
        stop_token_ids: list[int] = field(default_factory=list)
        stop_strings: list[str] = field(default_factory=list)
        ignore_eos: bool = False

    @dataclass(slots=True)
    class StepBatch:  # type: ignore[no-redef]
        seq_ids: list[int]
        input_ids: list[int]
        positions: list[int]
        query_lens: list[int]
        context_lens: list[int]
        block_tables: list[list[int]]
        slot_mapping: list[int]
        sample_indices: list[int]
        sampling: list[Any]
        output_counts: list[int]
        constraints: list[object | None]


GREEDY = SamplingParams(temperature=0.0)
BLOCK = 16


@dataclass
class _Seq:
    tokens: list[int]
    prompt_len: int
    blocks: list[int] = field(default_factory=list)
    computed: int = 0
    constraint: object | None = None


class Driver:
    """A minimal scheduler stand-in: it tracks sequences and blocks and builds StepBatches."""

    def __init__(self, runner: ModelRunner) -> None:
        self.runner = runner
        self.free = list(range(runner.num_blocks))
        self.seqs: dict[int, _Seq] = {}

    def add(self, seq_id: int, prompt: list[int], share_from: int | None = None) -> None:
        """A new sequence; with ``share_from`` it reuses that sequence's full prompt blocks."""
        seq = _Seq(list(prompt), len(prompt))
        if share_from is not None:
            donor = self.seqs[share_from]
            full = min(len(prompt) - 1, donor.computed) // BLOCK
            if donor.tokens[: full * BLOCK] == prompt[: full * BLOCK]:
                seq.blocks = donor.blocks[:full]
                seq.computed = full * BLOCK
        self.seqs[seq_id] = seq

    def step(self, plan: dict[int, int]) -> dict[int, int]:
        """Run ``plan`` (seq id -> new tokens this step); return the tokens sampled per sequence."""
        batch = StepBatch([], [], [], [], [], [], [], [], [], [], [])
        for index, (seq_id, count) in enumerate(plan.items()):
            seq = self.seqs[seq_id]
            start, end = seq.computed, seq.computed + count
            while len(seq.blocks) * BLOCK < end:
                seq.blocks.append(self.free.pop())
            batch.seq_ids.append(seq_id)
            batch.input_ids += seq.tokens[start:end]
            batch.positions += range(start, end)
            batch.query_lens.append(count)
            batch.context_lens.append(end)
            batch.block_tables.append(list(seq.blocks))
            batch.slot_mapping += [
                seq.blocks[p // BLOCK] * BLOCK + p % BLOCK for p in range(start, end)
            ]
            seq.computed = end
            if end == len(seq.tokens):
                batch.sample_indices.append(index)
                batch.sampling.append(GREEDY)
                batch.output_counts.append(len(seq.tokens) - seq.prompt_len)
                batch.constraints.append(seq.constraint)
        tokens = self.runner.execute(batch)
        out = {}
        for index, token in zip(batch.sample_indices, tokens, strict=True):
            seq_id = batch.seq_ids[index]
            self.seqs[seq_id].tokens.append(token)
            out[seq_id] = token
        return out

    def generate(self, seq_ids: list[int], steps: int) -> None:
        """Prefill every sequence together, then decode all of them ``steps`` times."""
        self.step({i: len(self.seqs[i].tokens) - self.seqs[i].computed for i in seq_ids})
        for _ in range(steps):
            self.step({i: 1 for i in seq_ids})


@contextlib.contextmanager
def recorded_logits(runner: ModelRunner) -> Iterator[list[Any]]:
    """Capture the logits each step hands to the sampler."""
    seen: list[Any] = []
    sample = runner._sample

    def recording(logits: Any, *args: Any) -> Any:
        seen.append(logits.clone())
        return sample(logits, *args)

    runner._sample = recording
    try:
        yield seen
    finally:
        runner._sample = sample


@pytest.fixture(scope="module")
def runner() -> ModelRunner:
    # float32 weights: these tests compare logits to 1e-4, which the quantized kernels' bfloat16
    # activations cannot promise (test_weight_parity.py checks every choice's tokens).
    return ModelRunner(
        EngineConfig(
            default_model_path(), kv_cache_bytes=64 << 20, block_size=BLOCK, weights="float32"
        )
    )


def prompt(runner: ModelRunner, text: str) -> list[int]:
    chat = f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
    return runner.tokenizer.encode(chat)


def test_cache_is_sized_from_the_byte_budget(runner: ModelRunner) -> None:
    assert runner.num_blocks == (64 << 20) // (BLOCK * runner.config.kv_bytes_per_token(4))
    assert runner.kv_caches[0][0].shape == (runner.num_blocks, BLOCK, 3, 64)
    assert len(runner.kv_caches) == 30


def test_answers_the_capital_question(runner: ModelRunner) -> None:
    driver = Driver(runner)
    driver.add(0, prompt(runner, "What is the capital of France?"))
    driver.generate([0], 8)
    assert "Paris" in runner.tokenizer.decode(driver.seqs[0].tokens[driver.seqs[0].prompt_len :])


@contextlib.contextmanager
def float_path_only(runner: ModelRunner) -> Iterator[None]:
    """Every step on the float32 weights: under int4-decode a step of up to 16 rows otherwise
    runs on the 4-bit copy (quant.DualLinear, or the fused C step over it), close to but not
    bit-equal with the float path."""
    duals = [m for m in runner.model.modules() if isinstance(m, DualLinear)]
    limits = [d.max_rows for d in duals]
    fused, runner._fused = runner._fused, None
    for dual in duals:
        dual.max_rows = 0
    try:
        yield
    finally:
        runner._fused = fused
        for dual, limit in zip(duals, limits, strict=True):
            dual.max_rows = limit


def test_chunked_prefill_matches_one_shot(runner: ModelRunner) -> None:
    ids = prompt(runner, "Explain paged attention in two sentences, with an example. " * 2)
    assert len(ids) > 32
    driver = Driver(runner)
    driver.add(0, ids)
    driver.add(1, ids)
    with recorded_logits(runner) as seen, float_path_only(runner):
        whole = driver.step({0: len(ids)})
        assert driver.step({1: 16}) == {}  # a chunk short of the prompt's end samples nothing
        assert driver.step({1: 5}) == {}
        chunked = driver.step({1: len(ids) - 21})
    assert whole[0] == chunked[1]
    torch.testing.assert_close(seen[1], seen[0], atol=1e-4, rtol=1e-4)


def test_batched_steps_match_sequences_run_alone(runner: ModelRunner) -> None:
    texts = ["Name three colours.", "What is 2+2?", "Write a haiku about rain."]
    alone = []
    for text in texts:
        driver = Driver(runner)
        driver.add(0, prompt(runner, text))
        driver.generate([0], 6)
        alone.append(driver.seqs[0].tokens)
    driver = Driver(runner)
    for i, text in enumerate(texts):
        driver.add(i, prompt(runner, text))
    # Staggered starts give mixed steps: a prompt chunk next to running decodes.
    driver.step({0: len(driver.seqs[0].tokens)})
    driver.step({0: 1, 1: 7})
    driver.step({0: 1, 1: len(driver.seqs[1].tokens) - 7, 2: len(driver.seqs[2].tokens)})
    while any(len(driver.seqs[i].tokens) < len(alone[i]) for i in range(3)):
        driver.step({i: 1 for i in range(3) if len(driver.seqs[i].tokens) < len(alone[i])})
    assert [driver.seqs[i].tokens for i in range(3)] == alone


def test_cached_prefix_gives_the_same_logits(runner: ModelRunner) -> None:
    long = prompt(runner, "Summarise the plot of Hamlet, act by act. " * 5)
    driver = Driver(runner)
    driver.add(0, long)
    with recorded_logits(runner) as seen, float_path_only(runner):
        driver.step({0: len(long)})
        driver.add(2, long, share_from=0)  # reuses the full blocks of sequence 0
        cached = driver.seqs[2].computed
        assert cached >= 2 * BLOCK
        driver.step({2: len(long) - cached})
    torch.testing.assert_close(seen[1], seen[0], atol=1e-4, rtol=1e-4)


def test_narrow_steps_on_the_4bit_copy_match_the_float_path() -> None:
    runner = ModelRunner(
        EngineConfig(
            default_model_path(), kv_cache_bytes=64 << 20, block_size=BLOCK, weights="int4-decode"
        )
    )
    if not any(isinstance(m, DualLinear) for m in runner.model.modules()):
        pytest.skip("the C kernels are not built here: every step is on the float path")
    long = prompt(runner, "Summarise the plot of Hamlet, act by act. " * 5)
    logits = []
    for narrow in (True, False):
        driver = Driver(runner)
        driver.add(0, long)
        driver.step({0: len(long) - 3})
        with recorded_logits(runner) as seen, contextlib.ExitStack() as stack:
            if not narrow:
                stack.enter_context(float_path_only(runner))
            driver.step({0: 3})  # 3 rows: the 4-bit path unless forced onto the float one
        logits.append(seen[0])
    # The kernel rounds activations to int16 (about 4e-5 of each output's scale); logits span
    # about +-40. A wrong weight or layout would move them by whole units.
    torch.testing.assert_close(logits[0], logits[1], atol=2e-2, rtol=0)
    assert int(logits[0].argmax()) == int(logits[1].argmax())
    runner.close()


class OnlyToken:
    """A constraint double that allows exactly one token."""

    def __init__(self, token: int) -> None:
        self.token = token

    def fill_bitmask(self, bitmask: Any, row: int) -> None:
        bitmask[row] = 0
        word, bit = divmod(self.token, 32)
        bitmask[row, word] = torch.tensor(1 << bit, dtype=torch.int64).to(torch.int32)


def test_constraint_bitmask_limits_sampling(runner: ModelRunner) -> None:
    driver = Driver(runner)
    driver.add(0, prompt(runner, "Say yes."))
    driver.add(1, prompt(runner, "Say yes."))
    driver.seqs[1].constraint = OnlyToken(12345)
    driver.seqs[0].constraint = OnlyToken(31 + 32 * 7)  # the sign bit of an int32 word
    out = driver.step({0: len(driver.seqs[0].tokens), 1: len(driver.seqs[1].tokens)})
    assert out == {0: 31 + 32 * 7, 1: 12345}


def test_a_step_without_samples_returns_nothing(runner: ModelRunner) -> None:
    driver = Driver(runner)
    driver.add(0, prompt(runner, "Hello"))
    assert driver.step({0: 3}) == {}


def test_kernel_signature_path_matches_cpu_plan(runner: ModelRunner) -> None:
    """The path the GPU kernels plug into, run here with the reference functions in their place."""
    from backends.engine.model.attention import paged_attention_reference, store_kv_reference

    texts = ["Name three colours.", "What is 2+2?"]
    results = []
    for kernels in (None, (store_kv_reference, paged_attention_reference)):
        runner._kernels = kernels
        try:
            driver = Driver(runner)
            for i, text in enumerate(texts):
                driver.add(i, prompt(runner, text))
            driver.step({0: len(driver.seqs[0].tokens)})
            driver.step({0: 1, 1: len(driver.seqs[1].tokens)})
            driver.generate([0, 1], 3)
            results.append([driver.seqs[i].tokens for i in range(2)])
        finally:
            runner._kernels = None
    assert results[0] == results[1]


@pytest.mark.gpu
def test_cuda_graphs_match_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    texts = ["Name three colours.", "What is 2+2?", "Write a haiku about rain."]
    results = []
    for eager in ("1", "0"):
        monkeypatch.setenv("CLAWLOOP_ENGINE_EAGER", eager)
        gpu = ModelRunner(
            EngineConfig(default_model_path(), device="cuda", kv_cache_bytes=256 << 20)
        )
        driver = Driver(gpu)
        for i, text in enumerate(texts):
            driver.add(i, prompt(gpu, text))
        driver.generate(list(range(3)), 16)
        results.append([driver.seqs[i].tokens for i in range(3)])
        gpu.close()
    assert results[0] == results[1]
