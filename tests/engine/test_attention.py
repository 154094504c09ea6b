"""Paged attention (reference and CPU plan) against plain causal attention on unpaged K/V."""

from __future__ import annotations

import random

import pytest
import torch

from backends.engine.model.attention import (
    paged_attention_reference,
    plan_cpu_attention,
    store_kv_reference,
)

HEADS, KV_HEADS, HEAD_DIM = 6, 2, 16


def unpaged_attention(q, k, v, new: int):
    """Causal softmax attention of the last ``new`` positions over all of k/v, in float64."""
    group = HEADS // KV_HEADS
    k = k.double().repeat_interleave(group, dim=1)  # [context, heads, dim]
    v = v.double().repeat_interleave(group, dim=1)
    context = k.shape[0]
    scores = torch.einsum("qhd,khd->hqk", q.double(), k) / HEAD_DIM**0.5
    positions = torch.arange(context - new, context)[:, None]
    scores = scores.masked_fill(torch.arange(context)[None, :] > positions, float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v)


def make_step(block_size: int, shapes: list[tuple[int, int]], seed: int):
    """Random per-sequence K/V histories, scattered over shuffled cache blocks.

    ``shapes`` holds (context length, new tokens) per sequence. Returns everything a step needs.
    """
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    num_blocks = sum(-(-c // block_size) for c, _ in shapes) + 3
    free = list(range(num_blocks))
    rng.shuffle(free)
    k_cache = torch.randn(num_blocks, block_size, KV_HEADS, HEAD_DIM, generator=gen)
    v_cache = torch.randn(num_blocks, block_size, KV_HEADS, HEAD_DIM, generator=gen)
    seqs = []
    for context, new in shapes:
        blocks = [free.pop() for _ in range(-(-context // block_size))]
        k = torch.randn(context, KV_HEADS, HEAD_DIM, generator=gen)
        v = torch.randn(context, KV_HEADS, HEAD_DIM, generator=gen)
        q = torch.randn(new, HEADS, HEAD_DIM, generator=gen)
        slots = [blocks[p // block_size] * block_size + p % block_size for p in range(context)]
        seqs.append({"blocks": blocks, "k": k, "v": v, "q": q, "slots": slots, "new": new})
    return k_cache, v_cache, seqs


SHAPES = [
    [(1, 1)],  # a one-token prompt
    [(37, 37)],  # a whole prompt, nothing cached
    [(50, 13), (9, 1), (33, 33), (64, 1)],  # chunk after a cached prefix, decodes, a fresh prompt
    [(c, 1) for c in (5, 17, 16, 80, 3, 31, 32, 33, 100, 7, 12, 64, 65, 2, 40, 41, 90, 11)],
]


@pytest.mark.parametrize("block_size", [1, 4, 16])
@pytest.mark.parametrize("shapes", SHAPES)
def test_paged_attention_matches_unpaged(block_size: int, shapes: list[tuple[int, int]]) -> None:
    k_cache, v_cache, seqs = make_step(block_size, shapes, seed=block_size * 100 + len(shapes))
    for seq in seqs:
        slots = torch.tensor(seq["slots"])
        store_kv_reference(seq["k"], seq["v"], k_cache, v_cache, slots)
    q = torch.cat([s["q"] for s in seqs])
    width = max(len(s["blocks"]) for s in seqs)
    tables = torch.tensor([s["blocks"] + [0] * (width - len(s["blocks"])) for s in seqs])
    starts = torch.tensor([0] + [s["new"] for s in seqs]).cumsum(0).to(torch.int32)
    contexts = torch.tensor([len(s["slots"]) for s in seqs], dtype=torch.int32)
    scale = HEAD_DIM**-0.5

    expected = torch.cat([unpaged_attention(s["q"], s["k"], s["v"], s["new"]) for s in seqs])
    reference = paged_attention_reference(
        q, k_cache, v_cache, tables.to(torch.int32), starts, contexts, scale
    )
    torch.testing.assert_close(reference.double(), expected, atol=1e-5, rtol=1e-5)

    # The CPU plan reads fresh K/V for uncached prompts and the cache for everything else.
    fresh_k = torch.cat([s["k"][-s["new"] :] for s in seqs])
    fresh_v = torch.cat([s["v"][-s["new"] :] for s in seqs])
    plan = plan_cpu_attention(
        [s["new"] for s in seqs],
        contexts.tolist(),
        [s["blocks"] for s in seqs],
        block_size,
        scale,
    )
    planned = plan(q, fresh_k, fresh_v, k_cache, v_cache)
    torch.testing.assert_close(planned.double(), expected, atol=1e-5, rtol=1e-5)


def test_many_decodes_are_split_into_length_groups() -> None:
    shapes = [(c, 1) for c in range(3, 200, 6)]
    _, _, seqs = make_step(16, shapes, seed=7)
    plan = plan_cpu_attention(
        [1] * len(seqs), [len(s["slots"]) for s in seqs], [s["blocks"] for s in seqs], 16, 0.25
    )
    assert len(plan.decode_groups) > 1
    rows = torch.cat([g.rows for g in plan.decode_groups if g.rows is not None])
    assert sorted(rows.tolist()) == list(range(len(seqs)))


def test_store_kv_writes_each_token_to_its_slot() -> None:
    k_cache = torch.zeros(4, 4, KV_HEADS, HEAD_DIM)
    v_cache = torch.zeros(4, 4, KV_HEADS, HEAD_DIM)
    k = torch.randn(3, KV_HEADS, HEAD_DIM)
    v = torch.randn(3, KV_HEADS, HEAD_DIM)
    store_kv_reference(k, v, k_cache, v_cache, torch.tensor([13, 2, 7]))
    torch.testing.assert_close(k_cache[3, 1], k[0])
    torch.testing.assert_close(v_cache[0, 2], v[1])
    torch.testing.assert_close(k_cache[1, 3], k[2])
    assert k_cache.abs().sum() == pytest.approx(k.abs().sum().item(), rel=1e-6)
