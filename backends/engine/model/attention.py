"""Paged attention in plain PyTorch: the reference for the GPU kernels and the engine's CPU path."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from backends.engine.weights.native.paged_decode import DecodeCall, PagedDecode


def store_kv_reference(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write k/v [tokens, kv_heads, head_dim] into the paged caches at their slots."""
    kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
    slots = slot_mapping.long()
    k_cache.view(-1, kv_heads, head_dim).index_copy_(0, slots, k.to(k_cache.dtype))
    v_cache.view(-1, kv_heads, head_dim).index_copy_(0, slots, v.to(v_cache.dtype))


def paged_attention_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_start_loc: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Attention of each sequence's new queries over its cached context, one sequence at a time.

    q [tokens, heads, head_dim]; block_tables [seqs, max_blocks]; query_start_loc [seqs + 1];
    context_lens [seqs] (cached + new tokens). The new tokens are the last ones of the context and
    attend causally among themselves. Returns [tokens, heads, head_dim].
    """
    out = torch.empty_like(q)
    block_size, kv_heads, head_dim = k_cache.shape[1], k_cache.shape[2], k_cache.shape[3]
    starts = query_start_loc.tolist()
    for index, context in enumerate(context_lens.tolist()):
        start, end = starts[index], starts[index + 1]
        new = end - start
        if new == 0:
            continue
        blocks = block_tables[index, : -(-context // block_size)].long()
        k = k_cache[blocks].reshape(-1, kv_heads, head_dim)[:context]
        v = v_cache[blocks].reshape(-1, kv_heads, head_dim)[:context]
        # query i sits at absolute position context - new + i and sees keys 0..that position
        allowed = torch.arange(context, device=q.device)[None, :] <= (
            context - new + torch.arange(new, device=q.device)[:, None]
        )
        result = F.scaled_dot_product_attention(
            q[start:end].transpose(0, 1).unsqueeze(0),
            k.transpose(0, 1).unsqueeze(0).to(q.dtype),
            v.transpose(0, 1).unsqueeze(0).to(q.dtype),
            attn_mask=allowed,
            scale=scale,
            enable_gqa=True,
        )
        out[start:end] = result[0].transpose(0, 1)
    return out


# Sequences with up to this many new tokens (decode rows, and the tokens a grammar forced) go to
# the C kernel where it runs; longer prompt chunks to SDPA.
NATIVE_MAX_QUERY = 8

# The C kernel's query rows per sequence at most (its MAX_ROWS): new tokens times heads.
NATIVE_MAX_ROWS = 256

# Decode rows are split into at most this many groups of similar context length, each padded only
# to its own longest context: less to gather and attend over when lengths differ widely.
MAX_DECODE_GROUPS = 4
_MIN_GROUP = 8


@dataclass(frozen=True, slots=True)
class NativeAttention:
    """The C kernel a CPU step may attend with, and the model's query heads and head size it
    needs; with ``prompts``, prompt chunks go to it too, cut into tiles (:func:`prompt_tiles`)."""

    kernel: PagedDecode
    heads: int
    head_dim: int
    prompts: bool = False


@dataclass(slots=True)
class _DecodeGroup:
    """Single-token sequences attended together: gathered blocks, masked past each context."""

    rows: torch.Tensor | None  # token indices in the step; None when the group is every token
    blocks: torch.Tensor | None  # [seqs * width] block ids, each row padded to the group's width
    mask: torch.Tensor | None  # [seqs, 1, 1, width * block_size] additive (0 or -inf)
    k_buffer: torch.Tensor | None = None  # gather targets, allocated once per step
    v_buffer: torch.Tensor | None = None
    native: DecodeCall | None = None  # the C kernel over the pool, in place of gather + SDPA


@dataclass(slots=True)
class _Prefill:
    """One sequence whose step carries more than one new token (a prompt chunk)."""

    start: int
    end: int
    context: int
    blocks: torch.Tensor | None  # block ids of the context; None if nothing was cached before
    mask: torch.Tensor | None  # [new, context] bool; None when plainly causal (no cached prefix)


@dataclass(slots=True)
class CpuAttentionPlan:
    """How one step's tokens attend, worked out once per step and shared by every layer.

    Sequences with a few new tokens (decode rows, and tokens a grammar forced; up to
    NATIVE_MAX_QUERY) run in one call of the C kernel over the block pool where it could be built
    (:mod:`backends.engine.weights.native`). Otherwise single-token sequences are batched by groups
    of
    similar length: their blocks are gathered into buffers reused by every layer, masked past each
    context length, and fed to one SDPA call per group with the query heads of each KV head laid
    out as its query rows (so K/V are read once per KV head). Prompt chunks run one SDPA call
    each, causal over the fresh K/V when nothing was cached before.
    """

    scale: float
    decode_groups: list[_DecodeGroup] = field(default_factory=list)
    prefills: list[_Prefill] = field(default_factory=list)

    def native_only(self) -> DecodeCall | None:
        """The C kernel's call when it takes every token of the step, else None."""
        if self.prefills or len(self.decode_groups) != 1:
            return None
        group = self.decode_groups[0]
        return group.native if group.rows is None else None

    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
    ) -> torch.Tensor:
        """Attention for one layer; the caller has already stored k/v in the cache."""
        if len(self.decode_groups) == 1 and self.decode_groups[0].rows is None:
            return self._decode(self.decode_groups[0], q, k_cache, v_cache)
        out = torch.empty_like(q)
        for group in self.decode_groups:
            if group.rows is None:
                out.copy_(self._decode(group, q, k_cache, v_cache))
            else:
                rows = q.index_select(0, group.rows)
                out.index_copy_(0, group.rows, self._decode(group, rows, k_cache, v_cache))
        for span in self.prefills:
            out[span.start : span.end] = self._prefill(span, q, k, v, k_cache, v_cache)
        return out

    def _decode(
        self, group: _DecodeGroup, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> torch.Tensor:
        if group.native is not None:
            return group.native(q, k_cache, v_cache, self.scale)
        assert group.blocks is not None, "a gathered decode group has its block ids"
        seqs, heads, head_dim = q.shape
        kv_heads = k_cache.shape[2]
        if group.k_buffer is None or group.v_buffer is None:
            # Once per step, not per layer: fresh large tensors would cost page faults each time.
            shape = (group.blocks.numel(), *k_cache.shape[1:])
            group.k_buffer = torch.empty(shape, dtype=k_cache.dtype, device=k_cache.device)
            group.v_buffer = torch.empty(shape, dtype=v_cache.dtype, device=v_cache.device)
        torch.index_select(k_cache, 0, group.blocks, out=group.k_buffer)
        torch.index_select(v_cache, 0, group.blocks, out=group.v_buffer)
        # a float16 cache beside float32 queries is widened here (the C kernel widens in place)
        keys = group.k_buffer.view(seqs, -1, kv_heads, head_dim).transpose(1, 2).to(q.dtype)
        values = group.v_buffer.view(seqs, -1, kv_heads, head_dim).transpose(1, 2).to(q.dtype)
        # [seqs, kv_heads, heads per kv head, dim]: GQA as plain attention with several query rows.
        grouped = q.view(seqs, kv_heads, heads // kv_heads, head_dim)
        out = F.scaled_dot_product_attention(
            grouped, keys, values, attn_mask=group.mask, scale=self.scale
        )
        return out.reshape(seqs, heads, head_dim)

    def _prefill(
        self,
        span: _Prefill,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
    ) -> torch.Tensor:
        kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
        if span.blocks is None:
            keys, values = k[span.start : span.end], v[span.start : span.end]
            if k_cache.dtype != q.dtype:  # as stored: what later steps read
                keys, values = (t.to(k_cache.dtype).to(q.dtype) for t in (keys, values))
        else:
            keys = k_cache.index_select(0, span.blocks).view(-1, kv_heads, head_dim)
            values = v_cache.index_select(0, span.blocks).view(-1, kv_heads, head_dim)
            keys, values = keys[: span.context].to(q.dtype), values[: span.context].to(q.dtype)
        result = F.scaled_dot_product_attention(
            q[span.start : span.end].transpose(0, 1).unsqueeze(0),
            keys.transpose(0, 1).unsqueeze(0),
            values.transpose(0, 1).unsqueeze(0),
            attn_mask=span.mask,
            is_causal=span.mask is None,
            scale=self.scale,
            enable_gqa=True,
        )
        return result[0].transpose(0, 1)


def plan_cpu_attention(
    query_lens: list[int],
    context_lens: list[int],
    block_tables: list[list[int]],
    block_size: int,
    scale: float,
    device: torch.device | str = "cpu",
    mask_dtype: torch.dtype = torch.float32,
    native: NativeAttention | None = None,
) -> CpuAttentionPlan:
    """Group a step's sequences into batched decode calls plus one call per prompt chunk.

    With ``native``, every sequence with up to NATIVE_MAX_QUERY new tokens goes to the C kernel,
    in one call per layer. With ``native.prompts`` too, so do prompt chunks, cut into tiles of
    consecutive tokens (:func:`prompt_tiles`): then the kernel takes every token of the step.
    """
    heads = native.heads if native is not None else 0
    if native is not None and native.prompts and heads > 0:
        query_lens, context_lens, block_tables = prompt_tiles(
            query_lens, context_lens, block_tables, NATIVE_MAX_ROWS // heads
        )
    plan = CpuAttentionPlan(scale=scale)
    starts = [0]
    for n in query_lens:
        starts.append(starts[-1] + n)
    decodes = [i for i, n in enumerate(query_lens) if n == 1]
    every_token = len(decodes) == len(query_lens)
    short: list[int] = []
    if native is not None:
        # The kernel holds at most NATIVE_MAX_ROWS query rows per sequence: tokens times heads.
        limit = max(min(NATIVE_MAX_QUERY, NATIVE_MAX_ROWS // max(heads, 1)), 1)
        if native.prompts:
            limit = max(NATIVE_MAX_ROWS // max(heads, 1), 1)
        short = [i for i, n in enumerate(query_lens) if 1 <= n <= limit]
    in_kernel = set(short)
    if native is not None and short:
        rows = None
        if len(short) < len(query_lens):
            picked = [t for i in short for t in range(starts[i], starts[i + 1])]
            rows = torch.tensor(picked, device=device)
        call = native.kernel.plan(
            [block_tables[i] for i in short],
            [context_lens[i] for i in short],
            heads,
            native.head_dim,
            [query_lens[i] for i in short],
        )
        plan.decode_groups.append(_DecodeGroup(rows, None, None, native=call))
        decodes = []
    for members in _split(decodes, context_lens):
        width = max(-(-context_lens[i] // block_size) for i in members)
        ids = [(block_tables[i][:width] + [0] * width)[:width] for i in members]
        contexts = torch.tensor([context_lens[i] for i in members], device=device)
        beyond = torch.arange(width * block_size, device=device)[None, :] >= contexts[:, None]
        mask = torch.zeros(beyond.shape, dtype=mask_dtype, device=device)
        mask.masked_fill_(beyond, float("-inf"))
        rows = None
        if not (every_token and len(members) == len(decodes)):
            rows = torch.tensor([starts[i] for i in members], device=device)
        plan.decode_groups.append(
            _DecodeGroup(
                rows,
                torch.tensor(ids, dtype=torch.long, device=device).view(-1),
                mask.view(len(members), 1, 1, -1),
            )
        )
    for i, new in enumerate(query_lens):
        if new <= 1 or i in in_kernel:
            continue
        context = context_lens[i]
        span = _Prefill(starts[i], starts[i + 1], context, None, None)
        if context > new:
            count = -(-context // block_size)
            span.blocks = torch.tensor(block_tables[i][:count], dtype=torch.long, device=device)
            span.mask = torch.arange(context, device=device)[None, :] <= (
                context - new + torch.arange(new, device=device)[:, None]
            )
        plan.prefills.append(span)
    return plan


def _split(decodes: list[int], context_lens: list[int]) -> list[list[int]]:
    """Cut the decode sequences, by context length, into up to MAX_DECODE_GROUPS groups."""
    count = min(MAX_DECODE_GROUPS, len(decodes) // _MIN_GROUP)
    if count <= 1:
        return [decodes] if decodes else []
    ordered = sorted(decodes, key=lambda i: context_lens[i])
    size = -(-len(ordered) // count)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def prompt_tiles(
    query_lens: list[int], context_lens: list[int], block_tables: list[list[int]], tile: int
) -> tuple[list[int], list[int], list[list[int]]]:
    """The step's sequences with each run of more than ``tile`` new tokens cut into tiles of up
    to ``tile`` consecutive tokens, each a sequence of its own: the same block table, its context
    ending at the tile's last token. Token order is unchanged, and so is every token's attention
    (the kernel reads the same keys in the same chunks for a token alone or in a tile)."""
    if all(n <= tile for n in query_lens):
        return query_lens, context_lens, block_tables
    lens: list[int] = []
    contexts: list[int] = []
    tables: list[list[int]] = []
    for new, context, table in zip(query_lens, context_lens, block_tables, strict=True):
        if new <= tile:
            lens.append(new)
            contexts.append(context)
            tables.append(table)
            continue
        first = context - new
        for start in range(0, new, tile):
            end = min(new, start + tile)
            lens.append(end - start)
            contexts.append(first + end)
            tables.append(table)
    return lens, contexts, tables
