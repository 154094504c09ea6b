"""Weight storage: GGUF 4-bit blocks map onto int4pack exactly; the kernels match F.linear."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from agent.errors import ConfigError, UserError
from backends.engine.config import EngineSettings
from backends.engine.weights.bf16_linear import Bf16Linear, bf16_kernel
from backends.engine.weights.gguf_weights import dequantize_tensor, group_quantized
from backends.engine.weights.quant import (
    FloatLinear,
    Int4Linear,
    Int8Linear,
    check_weights,
    make_linear,
)
from backends.gguf.default_model import default_model_path
from backends.gguf.reader import read_gguf


def _bf16_input(x: torch.Tensor) -> torch.Tensor:
    """The kernels round activations to bfloat16; the float reference gets the same input."""
    return x.bfloat16().float()


def test_q4_1_blocks_are_the_dequantized_weights_exactly() -> None:
    reader = read_gguf(default_model_path())
    tensor = next(t for t in reader.tensors if t.name == "blk.0.ffn_gate.weight")
    blocks = group_quantized(reader, tensor)
    assert blocks is not None
    expected = dequantize_tensor(reader, tensor)
    assert torch.equal(blocks.dequantize(), expected)
    x = torch.randn(3, expected.shape[1], generator=torch.Generator().manual_seed(0))
    out = Int4Linear(blocks)(x)
    ref = F.linear(_bf16_input(x), expected)
    # The kernel works and answers in bfloat16 (8 bits of mantissa): within 2% of the output scale.
    assert float((out - ref).abs().max()) <= 2e-2 * float(ref.abs().max())


def test_q8_0_embedding_is_not_a_4bit_group() -> None:
    reader = read_gguf(default_model_path())
    embed = next(t for t in reader.tensors if t.name == "token_embd.weight")
    assert group_quantized(reader, embed) is None


@pytest.mark.parametrize("batch", [1, 64])
def test_int8_per_channel_matches_its_dequantized_weights(batch: int) -> None:
    torch.manual_seed(0)
    weight = torch.randn(192, 576) * 0.05
    layer = Int8Linear.quantize(weight)
    dequantized = layer.q.float() * layer.scales[:, None]
    # Rounding per channel moves no weight by more than half a step.
    assert float((dequantized - weight).abs().max()) <= float(layer.scales.max()) / 2 + 1e-7
    x = torch.randn(batch, 576)
    torch.testing.assert_close(
        layer(x), F.linear(_bf16_input(x), dequantized), atol=2e-2, rtol=1e-2
    )
    ids = torch.tensor([0, 5, 191])
    assert torch.equal(layer.rows(ids), dequantized[ids])


def test_make_linear_storage_and_int4_fallback() -> None:
    torch.manual_seed(0)
    parts = [torch.randn(64, 96), torch.randn(32, 96)]
    assert isinstance(make_linear(parts, None, "int4"), Int4Linear)  # 96 is 3 groups of 32
    assert isinstance(make_linear([torch.randn(8, 40)], None, "int4"), Int8Linear)  # 40 is not
    fused = make_linear(parts, [torch.zeros(64), torch.ones(32)], "bfloat16")
    if bf16_kernel() is not None:  # AVX512-BF16: the kernel's own layout
        assert isinstance(fused, Bf16Linear)
    else:
        assert isinstance(fused, FloatLinear) and fused.weight.dtype == torch.bfloat16
    out = fused(torch.zeros(2, 96))
    assert out.dtype == torch.float32 and out[:, 64:].eq(1).all() and out[:, :64].eq(0).all()


def test_weight_choice_errors_name_the_fix() -> None:
    with pytest.raises(ConfigError, match="weights"):
        EngineSettings.from_options({"weights": "int3"})
    assert EngineSettings.from_options({"weights": "int4"}).weights == "int4"
    with pytest.raises(UserError, match="CPU only"):
        check_weights("int8", "cuda")
    with pytest.raises(UserError, match="choose one of"):
        check_weights("fp8", "cpu")


@pytest.mark.parametrize("weights", ["int8", "int4"])
def test_a_q8_0_head_keeps_its_groups_under_the_quantized_choices(weights: str) -> None:
    from backends.engine.weights.quant import Int8GroupLinear, group_kernel, head_and_embedding

    if group_kernel() is None:
        pytest.skip("the C kernels are not built here")
    generator = torch.Generator().manual_seed(0)
    q = torch.randint(-127, 128, (64, 4, 32), generator=generator)
    q[..., 0] = 127  # each group's scale is its largest weight / 127, as Q8_0 writes them
    scale = (torch.rand(64, 4, generator=generator) * 0.01).half().float()
    table = (q.float() * scale[..., None]).reshape(64, 128)
    head, embedding = head_and_embedding(table, None, weights, torch.float32)
    assert isinstance(head, Int8GroupLinear)
    ids = torch.tensor([3, 0, 63])
    assert torch.equal(embedding(ids), table[ids])
    x = torch.randn(2, 128, generator=generator)
    torch.testing.assert_close(head(x), x @ table.T, atol=1e-3, rtol=1e-4)
    # weights that are not 8-bit groups are requantized per channel, as before
    other, _ = head_and_embedding(
        torch.randn(64, 128, generator=generator), None, weights, torch.float32
    )
    assert isinstance(other, Int8Linear)


@pytest.mark.parametrize("rows", [0, 1, 17, 300])
def test_float32_gemm_matches_f_linear_on_either_library(rows: int) -> None:
    """oneDNN off Intel CPUs, MKL on them: the same product up to the order of float sums."""
    from backends.engine.weights.float32_gemm import float32_linear

    generator = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 576, generator=generator)
    w, b = torch.randn(192, 576, generator=generator), torch.randn(192, generator=generator)
    out = float32_linear(x, w, b)
    assert out.shape == (rows, 192) and out.dtype == torch.float32
    torch.testing.assert_close(out, F.linear(x, w, b), atol=2e-4, rtol=1e-5)
