"""The fused C step (every layer in one call) against the engine's PyTorch layers.

On the bundled model, with and without the shipped LoRA adapter, int4-decode (decode on the
4-bit copy of float32 weights), int4 and bfloat16 (on its AVX512-BF16 kernel, where this CPU
has one): the same logits to float rounding and the same greedy tokens, for single decodes,
several sequences at once, and short runs of forced tokens; and on the wide layout (and
bfloat16's kernel), prompt chunks too, their attention in tiles. float32 has no fused step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from backends.engine.core.engine_config import EngineConfig
from backends.engine.model.model_runner import ModelRunner
from backends.engine.weights.quant import DualLinear, Int4Linear, Int8GroupLinear
from backends.gguf.default_model import SHIPPED_ADAPTER, default_model_path
from tests.engine.test_model_runner import BLOCK, Driver, prompt, recorded_logits


def make_runner(weights: str, adapter: bool) -> ModelRunner:
    runner = ModelRunner(
        EngineConfig(
            default_model_path(),
            kv_cache_bytes=32 << 20,
            block_size=BLOCK,
            weights=weights,
            adapter=SHIPPED_ADAPTER if adapter else None,
        )
    )
    if runner._fused is None:
        pytest.skip("the C kernels are not built here: no fused step")
    return runner


@contextlib.contextmanager
def fused_off(runner: ModelRunner) -> Iterator[None]:
    fused, runner._fused = runner._fused, None
    try:
        yield
    finally:
        runner._fused = fused


@contextlib.contextmanager
def counting(runner: ModelRunner) -> Iterator[list[int]]:
    """How many steps the fused kernel ran."""
    calls: list[int] = []
    fused = runner._fused
    assert fused is not None

    class Counting:
        max_rows = fused.max_rows
        takes_prompts = fused.takes_prompts

        def __call__(self, *args: Any) -> bool:
            done = fused(*args)
            calls.append(int(done))
            return done

    runner._fused = Counting()  # type: ignore[assignment]
    try:
        yield calls
    finally:
        runner._fused = fused


def run_plan(runner: ModelRunner, fused: bool) -> tuple[list[list[int]], list[Any]]:
    """Two prompts, prefilled; then decodes of both, a 3-token run, and decodes of one."""
    driver = Driver(runner)
    texts = ["What is the capital of France?", "Write a haiku about rain."]
    for i, text in enumerate(texts):
        driver.add(i, prompt(runner, text))
    first = prompt(runner, texts[0])
    with contextlib.ExitStack() as stack:
        seen = stack.enter_context(recorded_logits(runner))
        if not fused:
            stack.enter_context(fused_off(runner))
        driver.step({0: len(first) - 3, 1: len(driver.seqs[1].tokens)})
        driver.step({0: 3, 1: 1})  # a short run of new tokens beside a decode
        for _ in range(6):
            driver.step({0: 1, 1: 1})
        for _ in range(6):
            driver.step({1: 1})
    return [driver.seqs[i].tokens for i in range(2)], seen


@pytest.mark.parametrize(
    ("weights", "adapter"),
    [("int4-decode", True), ("int4-decode", False), ("int4", True), ("bfloat16", True)],
)
def test_fused_step_matches_the_pytorch_layers(weights: str, adapter: bool) -> None:
    runner = make_runner(weights, adapter)
    assert runner._fused is not None
    takes_prompts = runner._fused.takes_prompts
    with counting(runner) as calls:
        fused_tokens, fused_logits = run_plan(runner, fused=True)
    # every step after the prefill is the kernel's, and ran there; the prefill too on the wide
    # layout (int4 on AVX-512 VNNI)
    assert calls == [1] * (14 if takes_prompts else 13)
    plain_tokens, plain_logits = run_plan(runner, fused=False)
    assert fused_tokens == plain_tokens
    # The same kernels and operations; the order of float sums differs, which moves some of the
    # int16 roundings of activations (and with int4's float16 KV cache, some of its roundings):
    # measured up to 0.017 with a float32 cache and 0.022 with float16, on logits spanning
    # about +-40.
    for fused_step, plain_step in zip(fused_logits, plain_logits, strict=True):
        torch.testing.assert_close(fused_step, plain_step, atol=3e-2, rtol=0)
    runner.close()


@pytest.mark.parametrize("weights", ["int4-decode", "int4", "bfloat16"])
def test_a_prompt_chunk_takes_the_fused_step_only_on_the_wide_layout(weights: str) -> None:
    runner = make_runner(weights, adapter=False)
    assert runner._fused is not None
    # bfloat16 runs on its AVX512-BF16 kernel wherever it has a fused step
    wide = all(
        m.columns is not None for m in runner.model.modules() if isinstance(m, Int4Linear)
    ) and not any(isinstance(m, DualLinear) for m in runner.model.modules())
    assert runner._fused.takes_prompts == wide
    driver = Driver(runner)
    driver.add(0, prompt(runner, "Name three colours."))
    with counting(runner) as calls:
        driver.step({0: len(driver.seqs[0].tokens)})
        driver.step({0: 1})
    assert calls == ([1, 1] if wide else [1])
    runner.close()


def test_a_long_prompt_in_tiles_matches_the_pytorch_layers() -> None:
    """A prompt of many tiles, in two chunks (the second over a cached first), beside a decode:
    the fused step against the PyTorch layers (the same attention kernel, tile by tile; the
    kernel itself is checked against SDPA's reference in test_native_kernels.py)."""
    runner = make_runner("int4", adapter=False)
    assert runner._fused is not None
    if not runner._fused.takes_prompts:
        pytest.skip("no wide layout here (AVX-512 VNNI): prompt chunks take the PyTorch layers")
    text = " ".join(f"Item {i} of the list is the word number {i}." for i in range(30))

    def run(fused: bool) -> tuple[list[list[int]], list[Any]]:
        driver = Driver(runner)
        driver.add(0, prompt(runner, text))
        driver.add(1, prompt(runner, "Say hello."))
        first = len(driver.seqs[0].tokens)
        with contextlib.ExitStack() as stack:
            seen = stack.enter_context(recorded_logits(runner))
            if not fused:
                stack.enter_context(fused_off(runner))
            driver.step({1: len(driver.seqs[1].tokens)})
            driver.step({0: first // 2, 1: 1})
            driver.step({0: first - first // 2, 1: 1})
            for _ in range(4):
                driver.step({0: 1, 1: 1})
        return [driver.seqs[i].tokens for i in range(2)], seen

    assert len(prompt(runner, text)) > 300  # many tiles of 28 tokens in each chunk
    with counting(runner) as calls:
        fused_tokens, fused_logits = run(fused=True)
    assert calls == [1] * 7
    plain_tokens, plain_logits = run(fused=False)
    assert fused_tokens == plain_tokens
    for fused_step, plain_step in zip(fused_logits, plain_logits, strict=True):
        torch.testing.assert_close(fused_step, plain_step, atol=3e-2, rtol=0)
    runner.close()


def test_int4_decode_fuses_whole_decode_batches_only_on_the_wide_layout() -> None:
    """int4-decode over 4-bit groups: decode steps of up to 64 rows run fused where the groups have
    the wide layout (its PyTorch layers keep DualLinear's 16 rows, so prompts keep float32 GEMM),
    16 elsewhere."""
    from backends.engine.weights.quant import DUAL_MAX_ROWS, WIDE_DUAL_MAX_ROWS

    runner = make_runner("int4-decode", adapter=False)
    assert runner._fused is not None
    duals = [m for m in runner.model.layers.modules() if isinstance(m, DualLinear)]
    wide = all(isinstance(d.narrow, Int4Linear) and d.narrow.columns is not None for d in duals)
    assert runner._fused.max_rows == (WIDE_DUAL_MAX_ROWS if wide else DUAL_MAX_ROWS)
    assert all(d.max_rows == DUAL_MAX_ROWS for d in duals)
    assert not runner._fused.takes_prompts
    # The head sees one row per sampled sequence: on 8-bit groups up to a full batch where they
    # have the wide layout.
    head = runner.model.lm_head
    assert isinstance(head, DualLinear) and isinstance(head.narrow, Int8GroupLinear)
    head_wide = head.narrow.columns is not None
    assert head.max_rows == (WIDE_DUAL_MAX_ROWS if head_wide else DUAL_MAX_ROWS)
    runner.close()


def test_float32_runs_float32_gemm_at_every_width() -> None:
    """float32 is float32 numerics: no 4-bit copy, no 8-bit head, no fused step over groups."""
    runner = ModelRunner(
        EngineConfig(
            default_model_path(), kv_cache_bytes=32 << 20, block_size=BLOCK, weights="float32"
        )
    )
    assert runner.weights == "float32" and runner._fused is None
    assert not any(isinstance(m, DualLinear | Int4Linear) for m in runner.model.modules())
    assert not isinstance(runner.model.lm_head, Int8GroupLinear | DualLinear)
    runner.close()
