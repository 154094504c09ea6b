"""Time the float projections: float32 on MKL and oneDNN, bfloat16 on oneDNN and the C kernel.

Run: ``PYTHONPATH=. nice -n 10 python bench/float_kernels.py [--threads N] [--repeat 30]``

For SmolLM2-135M's projection shapes (the fused q|k|v 960x576, o 576x576, gate|up 3072x576,
down 576x1536, and the LM head 49152x576) at 1 to 1,024 activation rows, GFLOP/s of the median
call: float32 ``F.linear`` (MKL's sgemm), float32 on oneDNN
(``torch.ops.mkldnn._linear_pointwise`` over the plain weights, as
``backends/engine/weights/float32_gemm.py`` runs it off Intel CPUs), bfloat16 ``F.linear`` (oneDNN)
in the fixed 64-row chunks that ``quant.FloatLinear`` runs for batch invariance, and the
AVX512-BF16 kernel (``native/bf16_matmul.c``, where this CPU has it), with the kernel's largest
difference from float64 over the same bfloat16 inputs relative to the largest output. Each call
reads a different copy of the weights, enough copies to overflow the last-level cache.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from quant_kernels import kernel_args, median_ms, rotating

from backends.engine.weights.bf16_linear import bf16_kernel
from backends.engine.weights.quant import FloatLinear

SHAPES = [(960, 576), (576, 576), (3072, 576), (576, 1536), (49152, 576)]
ROWS = (1, 8, 16, 64, 256, 1024)


def main() -> None:
    args = kernel_args(__doc__.splitlines()[0])
    kernel = bf16_kernel()
    print(f"torch {torch.__version__}, {args.threads} threads, load {os.getloadavg()}")
    print(f"AVX512-BF16 kernel: {'yes' if kernel else 'no (its column is empty)'}")
    head = "out x in     rows  fp32 MKL  fp32 oneDNN  bf16 oneDNN/64  bf16 kernel  (kernel err)"
    print(head)
    onednn = torch.ops.mkldnn._linear_pointwise
    with torch.inference_mode():
        for n, k in SHAPES:
            # enough bfloat16 copies to fill --cache-mib (the float32 ones are twice the bytes)
            copies = max(1, -(-(args.cache_mib << 20) // (n * k * 2)))
            dense = [torch.randn(n, k) * 0.05 for _ in range(copies)]
            half = [FloatLinear(w.bfloat16()) for w in dense]
            packed = [kernel.pack(w.bfloat16()) for w in dense] if kernel else []
            for rows in ROWS:
                x = torch.randn(rows, k)
                calls: list[list[Callable[[], torch.Tensor]]] = [
                    [partial(F.linear, x, w) for w in dense],
                    [partial(onednn, x, w, None, "none", [], "") for w in dense],
                    [partial(layer, x) for layer in half],
                ]
                if kernel:
                    calls.append([partial(kernel, x, p) for p in packed])
                ops = 2 * rows * n * k
                rates = [ops / median_ms(rotating(c), args.repeat) / 1e6 for c in calls]
                cells = "  ".join(f"{r:>11.1f}" for r in rates)
                err = ""
                if kernel:
                    ref = x.bfloat16().double() @ dense[0].bfloat16().double().T
                    diff = (kernel(x, packed[0]).double() - ref).abs().max() / ref.abs().max()
                    err = f"({float(diff):.0e})"
                print(f"{n:>5}x{k:<5} {rows:>5}  {cells}  {err}")
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
