"""Time PyTorch's weight-only CPU matmul kernels against float32 ``F.linear`` at the model's shapes.

Run: ``nice -n 10 python bench/quant_kernels.py [--threads N] [--repeat 50]``

Measures, for SmolLM2-135M's projection shapes (out x in: 576x576, 576x192, 576x1536,
1536x576, the fused q|k|v 960x576 and gate|up 3072x576 the engine runs, and the tied 49152x576
LM head) at batch 1 and batch 64: the median time of float32 ``F.linear``, bfloat16
``F.linear``, ``_weight_int8pack_mm`` (int8 per output channel) with float32 and with bfloat16
activations, and ``_weight_int4pack_mm_for_cpu`` (int4, groups of 32 with a scale and a zero
each) with bfloat16 activations; and each kernel's largest difference from float32 over the
same dequantized weights, relative to the largest output (kernel and activation rounding only:
the quantization error itself is measured by the parity tests). Each call reads a different copy
of the weights, enough copies to overflow the last-level cache, as a decode step that reads every
layer once does.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F

# (out_features, in_features): nn.Linear weight shapes.
SHAPES = [
    (576, 576),
    (192, 576),
    (1536, 576),
    (576, 1536),
    (960, 576),
    (3072, 576),
    (49152, 576),
]
GROUP = 32


def median_ms(fn: Callable[[], torch.Tensor], repeat: int) -> float:
    """Median wall time of one call, after a few warm-up calls."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def int8_weights(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-row int8 weights and their float32 scales."""
    scales = w.abs().amax(dim=1).clamp(min=1e-12) / 127
    return torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8), scales


def int4_weights(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Asymmetric int4 groups of 32: packed weights, [K/32, N, 2] scales and zeros, dequantized."""
    n, k = w.shape
    grouped = w.reshape(n, k // GROUP, GROUP)
    low, high = grouped.amin(-1), grouped.amax(-1)
    scales = ((high - low) / 15).clamp(min=1e-12)
    q = torch.round((grouped - low[..., None]) / scales[..., None]).clamp(0, 15)
    dequant = (q * scales[..., None] + low[..., None]).reshape(n, k)
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.reshape(n, k).to(torch.int32), 1)
    scale_zero = torch.stack((scales, low + 8 * scales), dim=-1).transpose(0, 1).contiguous()
    return packed, scale_zero, dequant


def rotating(calls: list[Callable[[], torch.Tensor]]) -> Callable[[], torch.Tensor]:
    """One call that runs the next of ``calls`` each time, so no copy stays in cache."""
    state = [0]

    def call() -> torch.Tensor:
        state[0] = (state[0] + 1) % len(calls)
        return calls[state[0]]()

    return call


def kernel_args(description: str) -> argparse.Namespace:
    """The kernel benchmarks' options (threads, repeats, bytes of weights to cycle over), with
    torch's threads and seed set from them."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--cache-mib", type=int, default=64, help="bytes of weights to cycle over")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    return args


def main() -> None:
    args = kernel_args(__doc__.splitlines()[0])
    print(f"torch {torch.__version__}, {args.threads} threads, load {os.getloadavg()}")
    print("out x in     batch  fp32 ms  bf16 ms  int8/f32  int8/bf16 (err)  int4/bf16 (err)")
    mm8, mm4 = torch.ops.aten._weight_int8pack_mm, torch.ops.aten._weight_int4pack_mm_for_cpu
    with torch.inference_mode():
        for n, k in SHAPES:
            copies = max(1, -(-(args.cache_mib << 20) // (n * k * 4)))
            ws = [torch.randn(n, k) * 0.05 for _ in range(copies)]
            q8s = [int8_weights(w) for w in ws]
            q4s = [int4_weights(w) for w in ws]
            wbs = [w.bfloat16() for w in ws]
            for batch in (1, 64):
                x = torch.randn(batch, k)
                xb = x.bfloat16()
                calls: list[list[Callable[[], torch.Tensor]]] = [
                    [partial(F.linear, x, w) for w in ws],
                    [partial(F.linear, xb, w) for w in wbs],
                    [partial(mm8, x, q, s) for q, s in q8s],
                    [partial(mm8, xb, q, s.bfloat16()) for q, s in q8s],
                    [partial(mm4, xb, q, GROUP, z.bfloat16()) for q, z, _ in q4s],
                ]
                times = [median_ms(rotating(c), args.repeat) for c in calls]
                q8, s8 = q8s[0]
                q4, sz4, w4 = q4s[0]
                ref8 = F.linear(x, q8.float() * s8[:, None])
                e8 = (mm8(xb, q8, s8.bfloat16()).float() - ref8).abs().max() / ref8.abs().max()
                ref4 = F.linear(x, w4)
                e4 = (
                    mm4(xb, q4, GROUP, sz4.bfloat16()).float() - ref4
                ).abs().max() / ref4.abs().max()
                cells = " ".join(f"{t:>8.3f}" for t in times[:3])
                print(
                    f"{n:>5}x{k:<5} {batch:>5} {cells} {times[3]:>9.3f} ({float(e8):.0e})"
                    f" {times[4]:>9.3f} ({float(e4):.0e})"
                )
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
