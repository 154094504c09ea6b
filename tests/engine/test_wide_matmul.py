"""The wide group kernel (native/wide_matmul.c, AVX-512 VNNI) against float32 and the group
kernel, and the default weights it makes the engine choose.

The kernel tests skip where the CPU lacks AVX-512 VNNI or no C compiler is there; the default
choice is checked both ways (with the kernel, and with it reported missing).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from backends.engine.model import loader
from backends.engine.weights import quant, wide_groups
from backends.engine.weights.native.group_matmul import GroupMatmul
from backends.engine.weights.native.wide_matmul import WideMatmul
from backends.engine.weights.quant import GroupQuantized, Int4Linear

needs_wide = pytest.mark.skipif(
    WideMatmul.available() is None, reason="no C compiler or no AVX-512 VNNI"
)


def _q4(out: int, cols: int, seed: int) -> GroupQuantized:
    generator = torch.Generator().manual_seed(seed)
    return Int4Linear.quantize(torch.randn(out, cols, generator=generator) * 0.05)


# Row counts around the kernel's tile of 8 (tails of 1 and 7 rows), an odd number of groups
# (96 columns), and the model's shapes.
@needs_wide
@pytest.mark.parametrize(
    ("rows", "out", "cols"), [(1, 960, 576), (7, 576, 1536), (9, 48, 96), (61, 3072, 576)]
)
def test_wide_q4_matches_float_and_the_group_kernel(rows: int, out: int, cols: int) -> None:
    wide, narrow = WideMatmul.available(), GroupMatmul.available()
    assert wide is not None and narrow is not None
    blocks = _q4(out, cols, rows)
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(out))
    got = wide.q4(
        x, wide.pack4(blocks.q), wide.pack_scales(blocks.scale), wide.pack_scales(blocks.low)
    )
    expected = F.linear(x, blocks.dequantize())
    # int16 activations, one scale per 32: about 4e-5 of the output's scale from float32.
    scale = float(expected.abs().max())
    assert float((got - expected).abs().max()) <= 2e-4 * scale
    # The group kernel rounds the same way: the two differ only in the order of float sums.
    same = narrow.q4(x, narrow.pack(blocks.q), blocks.scale, blocks.low)
    assert float((got - same).abs().max()) <= 2e-5 * scale


@needs_wide
def test_wide_q8_matches_its_groups() -> None:
    wide = WideMatmul.available()
    assert wide is not None
    generator = torch.Generator().manual_seed(3)
    q = torch.randint(-127, 128, (320, 576), dtype=torch.int8, generator=generator)
    scale = torch.rand(320, 18, generator=generator) * 1e-3
    x = torch.randn(13, 576, generator=generator)
    got = wide.q8(x, wide.pack8(q), wide.pack_scales(scale))
    dense = (q.view(320, 18, 32).float() * scale[..., None]).view(320, 576)
    expected = F.linear(x, dense)
    assert float((got - expected).abs().max()) <= 2e-4 * float(expected.abs().max())


@needs_wide
def test_each_row_is_the_same_alone_and_in_any_batch() -> None:
    """Batch invariance: the engine's outputs must not depend on what else is in the step."""
    wide = WideMatmul.available()
    assert wide is not None
    blocks = _q4(576, 1536, 0)
    weights = (wide.pack4(blocks.q), wide.pack_scales(blocks.scale), wide.pack_scales(blocks.low))
    x = torch.randn(37, 1536, generator=torch.Generator().manual_seed(1))
    batch = wide.q4(x, *weights)
    for row in (0, 8, 20, 36):
        assert torch.equal(wide.q4(x[row : row + 1], *weights)[0], batch[row])
    assert torch.equal(wide.q4(x[5:30], *weights), batch[5:30])


def test_a_shape_the_wide_layout_cannot_hold_keeps_the_group_kernel() -> None:
    layer = Int4Linear(_q4(40, 64, 2))  # 40 outputs: not a multiple of 16 columns
    assert layer.columns is None
    if layer.kernel is None:
        pytest.skip("the C kernels are not built here")
    x = torch.randn(5, 64)
    expected = F.linear(x, layer.dequantize())
    assert float((layer(x) - expected).abs().max()) <= 2e-4 * float(expected.abs().max())


@needs_wide
def test_int4_layers_run_on_the_wide_layout() -> None:
    layer = Int4Linear(_q4(64, 128, 4), bias=torch.arange(64.0))
    assert layer.columns is not None
    x = torch.randn(3, 128)
    expected = F.linear(x, layer.dequantize()) + torch.arange(64.0)
    assert float((layer(x) - expected).abs().max()) <= 2e-4 * float(expected.abs().max())


def test_the_default_weights_are_the_files_groups_where_the_wide_kernel_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    groups = {"layers.0.q_proj.weight": _q4(32, 64, 5), "layers.0.o_proj.weight": _q4(32, 64, 6)}
    mixed = {**groups, "layers.0.down_proj.weight": torch.randn(32, 64)}
    monkeypatch.setattr(wide_groups, "_KERNEL", [object()])  # the kernel reported present
    monkeypatch.setattr(quant, "_NATIVE", [object()])  # and the group kernel
    assert loader.file_weights(groups, "float32") == "int4"
    # a float projection: no requant; float32 prompts, decode on the groups there are
    assert loader.file_weights(mixed, "float32") == "int4-decode"
    assert loader.file_weights(groups, "bfloat16") == "bfloat16"  # a choice made stays made
    monkeypatch.setattr(wide_groups, "_KERNEL", [None])  # a CPU without AVX-512 VNNI
    assert loader.file_weights(groups, "float32") == "int4-decode"
    assert loader.file_weights(groups, "float32", gguf=False) == "float32"
    monkeypatch.setattr(quant, "_NATIVE", [None])  # no C kernels at all
    assert loader.file_weights(groups, "float32") == "float32"


@needs_wide
def test_the_bundled_model_loads_its_own_groups_by_default() -> None:
    from backends.gguf.default_model import default_model_path

    assert loader.load_model(default_model_path()).model.storage == "int4"
    assert loader.load_model(default_model_path(), weights="float32").model.storage == "float32"
