"""The C elementwise kernels of the CPU layers (``native/elementwise.c``) against PyTorch's ops."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from backends.engine.weights.native.elementwise import Elementwise

ops = Elementwise.available()
pytestmark = pytest.mark.skipif(ops is None, reason="no C compiler")


@pytest.mark.parametrize("rows", [1, 15, 300])  # one thread below 16 rows, every thread above
def test_rms_norm_matches_pytorch(rows: int) -> None:
    assert ops is not None
    generator = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 576, generator=generator) * 3
    weight = torch.randn(576, generator=generator)
    expected = F.rms_norm(x, (576,), weight, 1e-5)
    torch.testing.assert_close(ops.rms_norm(x, weight, 1e-5), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 15, 300])
def test_add_rms_norm_adds_in_place_and_norms_the_sum(rows: int) -> None:
    assert ops is not None
    generator = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 576, generator=generator)
    delta = torch.randn(rows, 576, generator=generator)
    weight = torch.randn(576, generator=generator)
    total = x + delta
    normed = ops.add_rms_norm(x, delta, weight, 1e-5)
    torch.testing.assert_close(x, total, rtol=0, atol=0)  # the sum, exactly, in place
    expected = F.rms_norm(total, (576,), weight, 1e-5)
    torch.testing.assert_close(normed, expected, rtol=1e-5, atol=1e-5)


def test_silu_times_matches_pytorch() -> None:
    assert ops is not None
    gate_up = torch.randn(40, 2 * 1536, generator=torch.Generator().manual_seed(0)) * 4
    gate, up = gate_up.split(1536, dim=-1)
    expected = F.silu(gate) * up
    torch.testing.assert_close(ops.silu_times(gate_up, 1536), expected, rtol=1e-5, atol=1e-5)
