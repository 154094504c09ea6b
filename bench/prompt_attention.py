"""Prompt-chunk attention: the C kernel in tiles against PyTorch's flash attention on the CPU.

A chunk of new tokens attends causally over itself and over what the sequence had cached; the
engine's fused step runs it in ``paged_decode.c``, cut into tiles by ``attention.prompt_tiles``,
and the PyTorch layers run ``F.scaled_dot_product_attention``. Both read the same block pool
(float32 here; the default float16 pool is widened a chunk at a time). Times are per 30 layers
(the bundled model's depth), each call repeated 30 times, on torch's thread count.

    python bench/prompt_attention.py
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from backends.engine.model.attention import NATIVE_MAX_ROWS, prompt_tiles
from backends.engine.weights.native.paged_decode import PagedDecode

HEADS, KV_HEADS, DIM, BLOCK = 9, 3, 64, 16  # the bundled model's attention
LAYERS = 30


def measure(kernel: PagedDecode, new: int, cached: int, dtype: torch.dtype) -> tuple[float, float]:
    """Seconds per LAYERS calls: the C kernel, then SDPA; and checks they agree."""
    torch.manual_seed(0)
    context = cached + new
    blocks = -(-context // BLOCK)
    k_pool = torch.randn(blocks + 1, BLOCK, KV_HEADS, DIM).to(dtype)
    v_pool = torch.randn(blocks + 1, BLOCK, KV_HEADS, DIM).to(dtype)
    table = list(range(1, blocks + 1))
    q = torch.randn(new, HEADS, DIM)
    lens, contexts, tables = prompt_tiles([new], [context], [table], NATIVE_MAX_ROWS // HEADS)
    call = kernel.plan(tables, contexts, HEADS, DIM, lens)
    scale = DIM**-0.5
    keys = k_pool[1:].reshape(-1, KV_HEADS, DIM)[:context].float()
    values = v_pool[1:].reshape(-1, KV_HEADS, DIM)[:context].float()
    allowed = torch.arange(context)[None, :] <= cached + torch.arange(new)[:, None]

    def sdpa() -> torch.Tensor:
        out = F.scaled_dot_product_attention(
            q.transpose(0, 1).unsqueeze(0),
            keys.transpose(0, 1).unsqueeze(0),
            values.transpose(0, 1).unsqueeze(0),
            attn_mask=allowed if cached else None,
            is_causal=not cached,
            scale=scale,
            enable_gqa=True,
        )
        return out[0].transpose(0, 1)

    difference = (call(q, k_pool, v_pool, scale) - sdpa()).abs().max().item()
    if difference > 1e-4:
        raise SystemExit(f"the kernel and SDPA disagree by {difference:.2e}")
    times = []
    for fn in (lambda: call(q, k_pool, v_pool, scale), sdpa):
        start = time.perf_counter()
        for _ in range(LAYERS):
            fn()
        times.append(time.perf_counter() - start)
    return times[0], times[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases", default="100:0,512:0,1000:0,300:2000", help="new:cached token counts"
    )
    parser.add_argument("--pool", choices=["float32", "float16"], default="float32")
    args = parser.parse_args()
    kernel = PagedDecode.available()
    if kernel is None:
        raise SystemExit("the C kernels are not built here (no compiler, or no AVX2)")
    dtype = getattr(torch, args.pool)
    print(f"{torch.get_num_threads()} threads, {args.pool} pool, ms per {LAYERS} layers")
    print(f"{'new':>6} {'cached':>7} {'C kernel':>9} {'SDPA':>7}")
    for case in args.cases.split(","):
        new, cached = (int(n) for n in case.split(":"))
        ours, theirs = measure(kernel, new, cached, dtype)
        print(f"{new:>6} {cached:>7} {ours * 1e3:>9.1f} {theirs * 1e3:>7.1f}")


if __name__ == "__main__":
    main()
