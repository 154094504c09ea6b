"""The engine's C kernels, built with the system compiler, against their PyTorch references.

The kernels are built once into the (test session's) cache folder. Where no C compiler or no
AVX2 is there, the kernel tests skip and the build test checks the PyTorch fallback instead.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from agent.host import c_compiler
from backends.engine.model.attention import (
    NativeAttention,
    paged_attention_reference,
    plan_cpu_attention,
    prompt_tiles,
)
from backends.engine.weights.native import build
from backends.engine.weights.native.group_matmul import GroupMatmul
from backends.engine.weights.native.paged_decode import PagedDecode
from backends.engine.weights.quant import Int4Linear

needs_q4 = pytest.mark.skipif(GroupMatmul.available() is None, reason="no C compiler or no AVX2")
needs_decode = pytest.mark.skipif(PagedDecode.available() is None, reason="no C compiler")


def scattered_tables(
    lengths: list[int], blocks: int, block: int, rng: random.Random
) -> tuple[list[list[int]], list[int]]:
    """Block tables for sequences of these lengths over a pool of ``blocks``, scattered as after
    a while of serving; and the block ids left over."""
    order = list(range(blocks))
    rng.shuffle(order)
    tables, used = [], 0
    for length in lengths:
        count = -(-length // block)
        tables.append(order[used : used + count])
        used += count
    return tables, order[used:]


# 96 columns are an odd number of groups and 75 an odd number of rows: the paths beside the
# two-groups-at-a-time one (AVX-512 VNNI, where the CPU has it).
@needs_q4
@pytest.mark.parametrize(
    ("rows", "out", "cols"), [(1, 960, 576), (5, 576, 1536), (64, 72, 96), (3, 75, 640)]
)
def test_q4_matmul_matches_its_dequantized_weights(rows: int, out: int, cols: int) -> None:
    generator = torch.Generator().manual_seed(rows)
    weight = torch.randn(out, cols, generator=generator) * 0.05
    blocks = Int4Linear.quantize(weight)
    x = torch.randn(rows, cols, generator=generator)
    kernel = GroupMatmul.available()
    assert kernel is not None
    got = kernel.q4(x, kernel.pack(blocks.q), blocks.scale.contiguous(), blocks.low.contiguous())
    expected = F.linear(x, blocks.dequantize())
    # Activations are rounded to int8 per group of 32 (a step of max|x|/127): within 3% of the
    # output's scale, and nowhere near a different answer.
    assert float((got - expected).abs().max()) <= 3e-2 * float(expected.abs().max())
    assert float((got - expected).abs().mean()) <= 5e-3 * float(expected.abs().max())


@needs_q4
def test_q4_matmul_zero_rows_and_bias_through_the_layer() -> None:
    weight = torch.randn(64, 64) * 0.1
    layer = Int4Linear(Int4Linear.quantize(weight), bias=torch.arange(64.0))
    assert layer.kernel is not None
    out = layer(torch.zeros(3, 64))  # an all-zero group has scale 0: no division by zero
    assert torch.allclose(out, torch.arange(64.0).expand(3, 64))
    torch_kernel = Int4Linear(Int4Linear.quantize(weight), bias=torch.arange(64.0), native=False)
    x = torch.randn(2, 64)
    assert torch.allclose(layer(x), torch_kernel(x), atol=5e-2 * float(torch_kernel(x).abs().max()))


@needs_decode
@pytest.mark.parametrize("pool_dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize(("seqs", "longest"), [(1, 1300), (16, 300), (5, 40), (3, 1)])
def test_paged_decode_matches_the_reference(
    seqs: int, longest: int, pool_dtype: torch.dtype
) -> None:
    """Decode rows alone; over a float16 pool the keys are scored as they are widened, and the
    rows ahead are prefetched through scattered block tables."""
    rng = random.Random(seqs)
    block, kv_heads, heads, dim, blocks = 16, 3, 9, 64, 600
    generator = torch.Generator().manual_seed(seqs)
    k_pool = torch.randn(blocks, block, kv_heads, dim, generator=generator).to(pool_dtype)
    v_pool = torch.randn(blocks, block, kv_heads, dim, generator=generator).to(pool_dtype)
    lengths = [longest] + [rng.randint(1, longest) for _ in range(seqs - 1)]
    tables, _ = scattered_tables(lengths, blocks, block, rng)
    q = torch.randn(seqs, heads, dim, generator=generator)
    kernel = PagedDecode.available()
    assert kernel is not None
    if pool_dtype == torch.float16 and not kernel.reads_half(kv_heads, dim):
        pytest.skip("no F16C here: float16 pools stay in PyTorch")
    got = kernel.plan(tables, lengths, heads, dim)(q, k_pool, v_pool, 0.125)
    width = max(len(t) for t in tables)
    padded = torch.tensor([t + [0] * (width - len(t)) for t in tables])
    expected = paged_attention_reference(
        q,
        k_pool.float(),
        v_pool.float(),
        padded,
        torch.arange(seqs + 1),
        torch.tensor(lengths),
        0.125,
    )
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # The plan routes a step's decode rows to the kernel and keeps prompt chunks in SDPA.
    plan = plan_cpu_attention(
        [1] * seqs,
        lengths,
        tables,
        block,
        0.125,
        native=NativeAttention(kernel, heads, dim),
    )
    assert [g.native is not None for g in plan.decode_groups] == [True]
    torch.testing.assert_close(plan(q, q, q, k_pool, v_pool), expected, atol=1e-5, rtol=1e-5)


@needs_decode
@pytest.mark.parametrize("new", [1, 3])
@pytest.mark.parametrize(
    ("kv_heads", "heads", "dim"), [(2, 8, 128), (4, 4, 32), (1, 2, 48), (1, 3, 40)]
)
def test_paged_decode_over_float16_at_other_head_sizes(
    kv_heads: int, heads: int, dim: int, new: int
) -> None:
    """Other models' heads (128, 32 and 40 dimensions, no grouping, one KV head) over a float16
    pool, one or three new tokens per sequence, against the reference."""
    rng = random.Random(dim)
    block, blocks = 16, 120
    generator = torch.Generator().manual_seed(dim)
    k_pool = torch.randn(blocks, block, kv_heads, dim, generator=generator).half()
    v_pool = torch.randn(blocks, block, kv_heads, dim, generator=generator).half()
    lengths = [500, 37, 129]
    tables, _ = scattered_tables(lengths, blocks, block, rng)
    news = [new] * len(lengths)
    q = torch.randn(sum(news), heads, dim, generator=generator)
    kernel = PagedDecode.available()
    assert kernel is not None
    if not kernel.reads_half(kv_heads, dim):
        pytest.skip("no F16C here: float16 pools stay in PyTorch")
    got = kernel.plan(tables, lengths, heads, dim, news)(q, k_pool, v_pool, dim**-0.5)
    width = max(len(t) for t in tables)
    padded = torch.tensor([t + [0] * (width - len(t)) for t in tables])
    starts = torch.arange(len(lengths) + 1) * new
    expected = paged_attention_reference(
        q, k_pool.float(), v_pool.float(), padded, starts, torch.tensor(lengths), dim**-0.5
    )
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_a_failed_build_leaves_the_pytorch_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CLAWLOOP_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "_loaded", {})
    monkeypatch.setattr(build, "c_compiler", lambda: "false")  # a compiler that always fails
    assert build.load("paged_decode") is None
    assert list((tmp_path / "native").glob("*.so")) == []
    monkeypatch.setattr(build, "c_compiler", lambda: None)
    monkeypatch.setattr(build, "_loaded", {})
    assert build.load("group_matmul") is None


def test_the_build_is_cached_per_source_and_reused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if c_compiler() is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("CLAWLOOP_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "_loaded", {})
    assert build.load("paged_decode") is not None
    (library,) = (tmp_path / "native").glob("paged_decode-*.so")
    stamp = library.stat().st_mtime_ns
    monkeypatch.setattr(build, "_loaded", {})
    calls: list[object] = []
    monkeypatch.setattr(build, "_compile", lambda *args: calls.append(args) or False)
    assert build.load("paged_decode") is not None  # the cached library, with no compiling
    assert calls == [] and library.stat().st_mtime_ns == stamp
    monkeypatch.setenv("CLAWLOOP_ENGINE_NATIVE", "0")
    monkeypatch.setattr(build, "_loaded", {})
    assert build.load("paged_decode") is None


@needs_decode
@pytest.mark.parametrize("pool_dtype", [torch.float32, torch.float16])
def test_paged_decode_runs_a_few_new_tokens_causally(pool_dtype: torch.dtype) -> None:
    """Tokens a grammar forced, or drafts to check, arrive several at a time: each sees the keys
    up to itself (over a float16 pool the keys are widened as they are transposed)."""
    rng = random.Random(7)
    block, kv_heads, heads, dim = 16, 3, 9, 64
    generator = torch.Generator().manual_seed(7)
    k_pool = torch.randn(300, block, kv_heads, dim, generator=generator).to(pool_dtype)
    v_pool = torch.randn(300, block, kv_heads, dim, generator=generator).to(pool_dtype)
    # one whose new tokens are all it has; 2 and 3 new tokens (drafts) over 130 and 1,000 keys
    lengths, news = [900, 5, 300, 17, 130, 1000], [5, 5, 1, 8, 2, 3]
    tables, spare = scattered_tables(lengths, 300, block, rng)
    q = torch.randn(sum(news), heads, dim, generator=generator)
    kernel = PagedDecode.available()
    assert kernel is not None
    if pool_dtype == torch.float16 and not kernel.reads_half(kv_heads, dim):
        pytest.skip("no F16C here: float16 pools stay in PyTorch")
    got = kernel.plan(tables, lengths, heads, dim, news)(q, k_pool, v_pool, 0.125)
    width = max(len(t) for t in tables)
    padded = torch.tensor([t + [0] * (width - len(t)) for t in tables])
    starts = torch.tensor([0, *torch.tensor(news).cumsum(0).tolist()])
    expected = paged_attention_reference(
        q, k_pool.float(), v_pool.float(), padded, starts, torch.tensor(lengths), 0.125
    )
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # In a step with a long prompt chunk too, only the short runs go to the kernel.
    lens = [*news, 40]
    plan = plan_cpu_attention(
        lens,
        [*lengths, 40],
        [*tables, spare[:3]],
        block,
        0.125,
        native=NativeAttention(kernel, heads, dim),
    )
    assert len(plan.decode_groups) == 1 and len(plan.prefills) == 1


@needs_decode
@pytest.mark.parametrize("pool_dtype", [torch.float32, torch.float16])
def test_prompt_chunks_in_tiles_match_the_reference(pool_dtype: torch.dtype) -> None:
    """Prompt chunks (one over a cached prefix, one with nothing cached) beside a decode row, all
    in the kernel: cut into tiles, against the reference over the same (widened) pool."""
    rng = random.Random(11)
    block, kv_heads, heads, dim = 16, 3, 9, 64
    generator = torch.Generator().manual_seed(11)
    k_pool = torch.randn(200, block, kv_heads, dim, generator=generator).to(pool_dtype)
    v_pool = torch.randn(200, block, kv_heads, dim, generator=generator).to(pool_dtype)
    lengths, news = [700, 90, 400], [300, 90, 1]
    tables, _ = scattered_tables(lengths, 200, block, rng)
    q = torch.randn(sum(news), heads, dim, generator=generator)
    kernel = PagedDecode.available()
    assert kernel is not None
    if pool_dtype == torch.float16 and not kernel.reads_half(kv_heads, dim):
        pytest.skip("no F16C here: float16 pools stay in PyTorch")
    plan = plan_cpu_attention(
        news,
        lengths,
        tables,
        block,
        0.125,
        native=NativeAttention(kernel, heads, dim, prompts=True),
    )
    assert plan.native_only() is not None and not plan.prefills
    width = max(len(t) for t in tables)
    padded = torch.tensor([t + [0] * (width - len(t)) for t in tables])
    starts = torch.tensor([0, *torch.tensor(news).cumsum(0).tolist()])
    expected = paged_attention_reference(
        q, k_pool.float(), v_pool.float(), padded, starts, torch.tensor(lengths), 0.125
    )
    torch.testing.assert_close(plan(q, q, q, k_pool, v_pool), expected, atol=1e-5, rtol=1e-5)


def test_prompt_tiles_keep_token_order_and_each_tiles_context() -> None:
    lens, contexts, tables = prompt_tiles([60, 1, 3], [100, 50, 3], [[1], [2], [3]], 28)
    assert lens == [28, 28, 4, 1, 3]
    assert contexts == [68, 96, 100, 50, 3]  # 40 cached, then each tile ends where it ends
    assert tables == [[1], [1], [1], [2], [3]]
