"""Triton KV-store and paged-attention kernels against a naive reference.

On the CPU they run in Triton's interpreter (``TRITON_INTERPRET=1``, numpy, float32): sizes are
kept small because the interpreter is slow. With CUDA they also run compiled, in bfloat16.
"""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

if importlib.util.find_spec("triton") is None:
    pytest.skip(
        "Triton is not installed: pip install triton (the kernels cannot be exercised)",
        allow_module_level=True,
    )

from backends.engine.model.triton_attention import launch_meta, paged_attention
from backends.engine.model.triton_store import store_kv

HEADS, KV_HEADS, HEAD_DIM = 9, 3, 64
ROOT = Path(__file__).resolve().parents[2]
Attention = Callable[..., torch.Tensor]


def naive_paged_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_start_loc: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Same signature as backends.engine.model.attention.paged_attention_reference, in float64."""
    out = torch.empty_like(q)
    block_size = k_cache.shape[1]
    group = q.shape[1] // k_cache.shape[2]
    for seq in range(block_tables.shape[0]):
        start, end = int(query_start_loc[seq]), int(query_start_loc[seq + 1])
        ctx = int(context_lens[seq])
        positions = torch.arange(ctx)
        blocks = block_tables[seq, positions // block_size].long()
        keys = k_cache[blocks, positions % block_size].double()  # [ctx, kv_heads, dim]
        values = v_cache[blocks, positions % block_size].double()
        keys = keys.repeat_interleave(group, dim=1)
        values = values.repeat_interleave(group, dim=1)
        query = q[start:end].double()  # [n, heads, dim]
        scores = torch.einsum("nhd,khd->hnk", query, keys) * scale
        query_pos = ctx - (end - start) + torch.arange(end - start)
        scores = scores.masked_fill(positions[None, None, :] > query_pos[None, :, None], -1e300)
        out[start:end] = torch.einsum("hnk,khd->nhd", scores.softmax(-1), values).to(q.dtype)
    return out


def reference() -> Attention:
    """The model code's reference when it is there, else the naive copy above."""
    try:
        from backends.engine.model.attention import paged_attention_reference
    except ImportError:
        return naive_paged_attention
    return paged_attention_reference


@dataclass(slots=True)
class Batch:
    q: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    block_tables: torch.Tensor
    query_start_loc: torch.Tensor
    context_lens: torch.Tensor

    def args(
        self,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        return (
            self.q,
            self.k_cache,
            self.v_cache,
            self.block_tables,
            self.query_start_loc,
            self.context_lens,
        )


def make_batch(
    seqs: list[tuple[int, int]],
    block_size: int,
    seed: int,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
) -> Batch:
    """seqs: (context_len, query_len) per sequence; blocks are handed out in a shuffled order."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    blocks_per_seq = [(ctx + block_size - 1) // block_size for ctx, _ in seqs]
    num_blocks = sum(blocks_per_seq) + 3
    free = list(range(1, num_blocks))  # block 0 is only padding
    rng.shuffle(free)
    width = max(blocks_per_seq)
    tables = torch.zeros(len(seqs), width, dtype=torch.int32)
    for i, n in enumerate(blocks_per_seq):
        tables[i, :n] = torch.tensor([free.pop() for _ in range(n)], dtype=torch.int32)
    shape = (num_blocks, block_size, KV_HEADS, HEAD_DIM)
    k_cache = torch.randn(shape, generator=gen)
    v_cache = torch.randn(shape, generator=gen)
    num_tokens = sum(q for _, q in seqs)
    q = torch.randn(num_tokens, HEADS, HEAD_DIM, generator=gen)
    starts = torch.tensor([0] + [q for _, q in seqs], dtype=torch.int32).cumsum(0)
    lens = torch.tensor([ctx for ctx, _ in seqs], dtype=torch.int32)

    def put(t: torch.Tensor) -> torch.Tensor:
        return t.to(device=device, dtype=dtype if t.is_floating_point() else t.dtype)

    return Batch(
        put(q), put(k_cache), put(v_cache), put(tables), put(starts.to(torch.int32)), put(lens)
    )


@pytest.fixture
def interpreter(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    yield


BATCHES = {
    "decode-only": [(1, 1), (17, 1), (40, 1)],
    "prefill-only": [(20, 20), (7, 7)],
    "mixed": [(33, 1), (24, 24), (45, 13), (5, 1)],
    "one-chunk-after-a-prefix": [(37, 9)],
}


@pytest.mark.usefixtures("interpreter")
@pytest.mark.parametrize("block_size", [1, 4, 16, 32])
@pytest.mark.parametrize("kind", list(BATCHES))
def test_paged_attention_matches_reference(block_size: int, kind: str) -> None:
    batch = make_batch(BATCHES[kind], block_size, seed=block_size)
    scale = HEAD_DIM**-0.5
    got = paged_attention(*batch.args(), scale)
    want = reference()(*batch.args(), scale)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)


@pytest.mark.usefixtures("interpreter")
def test_paged_attention_sees_only_the_context() -> None:
    # A key past a sequence's context length, or in another sequence's block, changes nothing.
    batch = make_batch([(10, 3), (6, 1)], 4, seed=9)
    scale = 0.125
    before = paged_attention(*batch.args(), scale)
    used = {int(b) for b in batch.block_tables[0, :3]} | {int(b) for b in batch.block_tables[1, :2]}
    unused = [b for b in range(batch.k_cache.shape[0]) if b not in used]
    batch.k_cache[unused] = 1e4
    batch.k_cache[int(batch.block_tables[0, 2]), 2:] = 1e4  # positions 10, 11 of sequence 0
    batch.v_cache[int(batch.block_tables[1, 1]), 2:] = 1e4  # positions 6, 7 of sequence 1
    torch.testing.assert_close(paged_attention(*batch.args(), scale), before)


@pytest.mark.usefixtures("interpreter")
@pytest.mark.parametrize(("block_size", "slot_dtype"), [(1, torch.int32), (16, torch.int64)])
def test_store_kv_writes_each_token_to_its_slot(block_size: int, slot_dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(block_size)
    num_blocks, tokens = 8, 7
    k = torch.randn(tokens, KV_HEADS, HEAD_DIM, generator=gen)
    v = torch.randn(tokens, KV_HEADS, HEAD_DIM, generator=gen)
    slots = torch.randperm(num_blocks * block_size, generator=gen)[:tokens].to(slot_dtype)
    slots[3] = -1  # padding: skipped
    k_cache = torch.zeros(num_blocks, block_size, KV_HEADS, HEAD_DIM)
    v_cache = torch.zeros_like(k_cache)
    store_kv(k, v, k_cache, v_cache, slots)
    want_k = torch.zeros_like(k_cache).view(-1, KV_HEADS, HEAD_DIM)
    want_v = torch.zeros_like(want_k)
    keep = slots >= 0
    want_k[slots[keep].long()] = k[keep]
    want_v[slots[keep].long()] = v[keep]
    assert torch.equal(k_cache.view_as(want_k), want_k)
    assert torch.equal(v_cache.view_as(want_v), want_v)


@pytest.mark.usefixtures("interpreter")
def test_store_kv_accepts_strided_views_of_a_fused_projection() -> None:
    # k and v are often column slices of one qkv projection: rows are dense, the tokens are not.
    qkv = torch.randn(5, (HEADS + 2 * KV_HEADS) * HEAD_DIM)
    k = qkv[:, HEADS * HEAD_DIM : (HEADS + KV_HEADS) * HEAD_DIM].view(5, KV_HEADS, HEAD_DIM)
    v = qkv[:, (HEADS + KV_HEADS) * HEAD_DIM :].view(5, KV_HEADS, HEAD_DIM)
    k_cache = torch.zeros(2, 4, KV_HEADS, HEAD_DIM)
    v_cache = torch.zeros_like(k_cache)
    store_kv(k, v, k_cache, v_cache, torch.tensor([7, 0, 1, 5, 2], dtype=torch.int32))
    assert torch.equal(k_cache.view(8, KV_HEADS, HEAD_DIM)[[7, 0, 1, 5, 2]], k)
    assert torch.equal(v_cache.view(8, KV_HEADS, HEAD_DIM)[[7, 0, 1, 5, 2]], v)


def test_cpu_tensors_without_the_interpreter_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    batch = make_batch([(3, 1)], 4, seed=1)
    with pytest.raises(ValueError, match="TRITON_INTERPRET"):
        paged_attention(*batch.args(), 0.125)


def test_bad_shapes_are_refused(interpreter: None) -> None:
    batch = make_batch([(3, 1)], 4, seed=1)
    with pytest.raises(ValueError, match="heads"):
        paged_attention(batch.q[:, :8], *batch.args()[1:], 0.125)
    with pytest.raises(ValueError, match="query starts"):
        paged_attention(*batch.args()[:4], batch.query_start_loc[:1], batch.context_lens, 0.125)


def compile_for_hopper(kernel: Any, types: dict[str, str], consts: dict[str, int]) -> None:
    """Compile a kernel to an sm_90 cubin with Triton's own toolchain: no GPU needed."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, compile

    compiled = compile(ASTSource(kernel, types, consts), target=GPUTarget("cuda", 90, 32))
    if "cubin" not in compiled.asm:
        raise RuntimeError(f"no cubin for {kernel}")


def compile_all() -> None:
    """Compile both kernels for a Hopper GPU in a few shapes (run in a fresh interpreter)."""
    from backends.engine.model import triton_attention, triton_store

    kernel = triton_attention._kernel()
    int_ptrs = {"block_tables_ptr", "query_start_ptr", "context_lens_ptr"}
    for dtype, tokens, block_size in [("bf16", 40, 16), ("fp32", 4, 1)]:
        meta = launch_meta(tokens, 4, HEADS, KV_HEADS, HEAD_DIM, block_size)
        types = {}
        for name in kernel.arg_names:
            if name in meta:
                types[name] = "constexpr"
            elif name.endswith("_ptr"):
                types[name] = "*i32" if name in int_ptrs else f"*{dtype}"
            else:
                types[name] = "fp32" if name == "qk_scale_log2" else "i32"
        compile_for_hopper(kernel, types, meta)
    types = {"slot_ptr": "*i32", "k_stride": "i32", "v_stride": "i32"}
    types |= {"k_ptr": "*bf16", "v_ptr": "*bf16", "k_cache_ptr": "*bf16", "v_cache_ptr": "*bf16"}
    types |= {"ROW": "constexpr", "ROW_PADDED": "constexpr"}
    compile_for_hopper(triton_store._kernel(), types, {"ROW": 192, "ROW_PADDED": 256})


def test_kernels_compile_for_the_gpu(tmp_path: Path) -> None:
    # The interpreter forgives what the compiler may not (loop-carried types, early exits), so
    # compile for real. In a fresh process: the interpreter leaves triton.language patched.
    pytest.importorskip("triton.backends.compiler")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(Path(__file__).parent)])
    env["TRITON_CACHE_DIR"] = str(tmp_path)  # really compile, every time
    done = subprocess.run(
        [sys.executable, "-c", "import test_triton_kernels as t; t.compile_all()"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("block_size", [16, 32])
@pytest.mark.parametrize("kind", [*BATCHES, "long"])
def test_cuda_bf16_paged_attention(
    block_size: int, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    seqs = BATCHES.get(kind) or [(700, 1), (1000, 300), (129, 129), (64, 1)]
    batch = make_batch(seqs, block_size, seed=3, dtype=torch.bfloat16, device="cuda")
    got = paged_attention(*batch.args(), HEAD_DIM**-0.5)
    cpu_args = [t.cpu().float() if t.is_floating_point() else t.cpu() for t in batch.args()]
    want = reference()(*cpu_args, HEAD_DIM**-0.5)
    torch.testing.assert_close(got.float().cpu(), want, atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
@cuda
def test_cuda_bf16_store_kv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    k = torch.randn(100, KV_HEADS, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    k_cache = torch.zeros(10, 16, KV_HEADS, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    v_cache = torch.zeros_like(k_cache)
    slots = torch.randperm(160, device="cuda")[:100].to(torch.int32)
    store_kv(k, v, k_cache, v_cache, slots)
    assert torch.equal(k_cache.view(160, KV_HEADS, HEAD_DIM)[slots.long()], k)
    assert torch.equal(v_cache.view(160, KV_HEADS, HEAD_DIM)[slots.long()], v)
