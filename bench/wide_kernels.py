"""Time the engine's C group kernels, narrow and wide, against float32 ``F.linear``.

Run: ``PYTHONPATH=. nice -n 10 python bench/wide_kernels.py [--threads N] [--repeat 30]``

For SmolLM2-135M's projection shapes (the fused q|k|v 960x576, o 576x576, gate|up 3072x576,
down 576x1536, and the Q8_0 LM head 49152x576) at 1 to 512 activation rows: the median time of
float32 ``F.linear`` over the dequantized weights, the group kernel
(``native/group_matmul.c``, the layout of one weight row along the lanes) and the wide kernel
(``native/wide_matmul.c``, 16 output columns along the lanes; AVX-512 VNNI only), each as
GOP/s, and the wide kernel's largest difference from float32 relative to the largest output.
Each call reads a different copy of the weights, enough copies to overflow the last-level
cache, as a decode step that reads every layer once does. The engine's choice of
kernel by row count (``backends/engine/weights/wide_groups.py``) rests on these figures.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from quant_kernels import kernel_args, median_ms, rotating

from backends.engine.weights.native.group_matmul import GroupMatmul
from backends.engine.weights.native.wide_matmul import WideMatmul

SHAPES = [(960, 576, 4), (576, 576, 4), (3072, 576, 4), (576, 1536, 4), (49152, 576, 8)]
ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 512)
GROUP = 32


def main() -> None:
    args = kernel_args(__doc__.splitlines()[0])
    narrow, wide = GroupMatmul.available(), WideMatmul.available()
    if narrow is None or wide is None:
        raise SystemExit("the wide kernel needs a CPU with AVX-512 VNNI and a C compiler")
    print(f"torch {torch.__version__}, {args.threads} threads, load {os.getloadavg()}")
    print("out x in     bits  rows  fp32 GOP/s  group GOP/s  wide GOP/s  (wide err)")
    with torch.inference_mode():
        for n, k, bits in SHAPES:
            copies = max(1, -(-(args.cache_mib << 20) // (n * k * bits // 8)))
            layers = [_layer(n, k, bits, narrow, wide) for _ in range(copies)]
            for rows in ROWS:
                x = torch.randn(rows, k)
                calls: list[list[Callable[[], torch.Tensor]]] = [
                    [partial(F.linear, x, layer["dense"]) for layer in layers[:4]],
                    [partial(layer["narrow"], x) for layer in layers],
                    [partial(layer["wide"], x) for layer in layers],
                ]
                ops = 2 * rows * n * k
                rates = [ops / median_ms(rotating(c), args.repeat) / 1e6 for c in calls]
                ref = F.linear(x, layers[0]["dense"])
                err = (layers[0]["wide"](x) - ref).abs().max() / ref.abs().max()
                cells = "  ".join(f"{r:>10.1f}" for r in rates)
                print(f"{n:>5}x{k:<5} {bits:>5} {rows:>5}  {cells}  ({float(err):.0e})")
    print(f"load {os.getloadavg()}")


def _layer(
    n: int, k: int, bits: int, narrow: GroupMatmul, wide: WideMatmul
) -> dict[str, Callable[..., torch.Tensor] | torch.Tensor]:
    """Random weights as float32, the group kernel and the wide kernel take them."""
    groups = k // GROUP
    if bits == 4:
        q = torch.randint(0, 16, (n, k), dtype=torch.uint8)
        scale, low = torch.rand(n, groups) * 0.01, -torch.rand(n, groups) * 0.08
        dense = (q.view(n, groups, GROUP) * scale[..., None] + low[..., None]).view(n, k)
        packed, wq = GroupMatmul.pack(q), WideMatmul.pack4(q)
        ws, wl = WideMatmul.pack_scales(scale), WideMatmul.pack_scales(low)
        return {
            "dense": dense,
            "narrow": lambda x: narrow.q4(x, packed, scale, low),
            "wide": lambda x: wide.q4(x, wq, ws, wl),
        }
    q8 = torch.randint(-127, 128, (n, k), dtype=torch.int8)
    scale = torch.rand(n, groups) * 0.001
    dense = (q8.view(n, groups, GROUP).float() * scale[..., None]).view(n, k)
    w8, s8 = WideMatmul.pack8(q8), WideMatmul.pack_scales(scale)
    return {
        "dense": dense,
        "narrow": lambda x: narrow.q8(x, q8, scale),
        "wide": lambda x: wide.q8(x, w8, s8),
    }


if __name__ == "__main__":
    main()
