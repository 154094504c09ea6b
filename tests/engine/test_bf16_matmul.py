"""The AVX512-BF16 matmul (``native/bf16_matmul.c``): exact bfloat16 products summed in float32,
and every row's result the same alone and in any batch. Skips where this CPU lacks AVX512-BF16
(there bfloat16 keeps oneDNN's GEMM in fixed chunks, checked in test_weight_parity.py)."""

from __future__ import annotations

import pytest
import torch

from backends.engine.weights.bf16_linear import Bf16Linear, bf16_kernel
from backends.engine.weights.native.bf16_matmul import Bf16Matmul


@pytest.fixture(scope="module")
def kernel() -> Bf16Matmul:
    found = bf16_kernel()
    if found is None:
        pytest.skip("this CPU (or compiler) has no AVX512-BF16: bfloat16 keeps F.linear")
    return found


def _case(rows: int, cols: int, out: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=generator)
    w = torch.randn(out, cols, generator=generator).bfloat16()
    return x, w


@pytest.mark.parametrize(("rows", "cols", "out"), [(1, 576, 192), (9, 1536, 576), (37, 64, 48)])
def test_matches_float64_over_the_rounded_inputs(
    kernel: Bf16Matmul, rows: int, cols: int, out: int
) -> None:
    x, w = _case(rows, cols, out)
    y = kernel(x, kernel.pack(w))
    exact = x.bfloat16().double() @ w.double().T
    # products are exact; only float32 sums round: ~cols * 2^-24 relative to the magnitudes
    bound = (x.bfloat16().double().abs() @ w.double().abs().T) * cols * 2.0**-24
    assert y.dtype == torch.float32 and y.shape == (rows, out)
    assert ((y.double() - exact).abs() <= bound).all()


def test_a_row_is_the_same_alone_and_in_any_batch(kernel: Bf16Matmul) -> None:
    x, w = _case(70, 576, 1536, seed=1)
    packed = kernel.pack(w)
    whole = kernel(x, packed)
    for rows in (1, 3, 8, 9, 37):
        for start in (0, 5, 70 - rows):
            part = kernel(x[start : start + rows], packed)
            assert torch.equal(part, whole[start : start + rows]), (rows, start)


def test_thread_count_does_not_change_the_sums(kernel: Bf16Matmul) -> None:
    x, w = _case(12, 576, 960, seed=2)
    packed = kernel.pack(w)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = kernel(x, packed)
        torch.set_num_threads(max(2, before))
        shared = kernel(x, packed)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(alone, shared)


def test_rows_read_back_the_weights_and_empty_input(kernel: Bf16Matmul) -> None:
    _, w = _case(1, 64, 48, seed=3)
    packed = kernel.pack(w)
    ids = torch.tensor([0, 15, 16, 47, 3])
    assert torch.equal(kernel.rows(packed, ids), w[ids])
    assert kernel(torch.empty(0, 64), packed).shape == (0, 48)


def test_the_linear_layer_adds_its_bias_and_keeps_the_dtype(kernel: Bf16Matmul) -> None:
    x, w = _case(4, 128, 32, seed=4)
    bias = torch.arange(32, dtype=torch.float32)
    layer = Bf16Linear.of(w, bias)
    assert layer is not None
    expected = kernel(x, kernel.pack(w)) + bias
    assert torch.equal(layer(x), expected)
    assert layer(x.bfloat16()).dtype == torch.bfloat16
    assert Bf16Linear.of(torch.randn(40, 64).bfloat16()) is None  # 40 outputs: not blocks of 16
