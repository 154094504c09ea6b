"""Paged attention in plain PyTorch: the reference for the GPU kernels and the engine's CPU path."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F


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


@dataclass(slots=True)
class _Prefill:
    """One sequence whose step carries more than one new token (a prompt chunk)."""

    start: int
    end: int
    context: int
    blocks: (
        torch.Tensor | None
    )  # block ids covering the context; None when nothing was cached before
    mask: torch.Tensor | None  # [new, context] bool; None when plain causal (no cached prefix)


@dataclass(slots=True)
class CpuAttentionPlan:
    """How one step's tokens attend, worked out once per step and shared by every layer.

    Single-token (decode) sequences are batched: their blocks are gathered for all of them at once
    into buffers reused by every layer, masked past each context length, and fed to one SDPA call.
    Prompt chunks run one SDPA call each, causal over fresh K/V when nothing was cached before.
    """

    num_tokens: int
    scale: float
    decode_rows: torch.Tensor | None = (
        None  # token indices of decode rows; None when there are none
    )
    decode_all: bool = False  # every token is a decode row (the common case: no index shuffles)
    decode_blocks: torch.Tensor | None = None  # [decodes * max_blocks] block ids
    decode_mask: torch.Tensor | None = None  # [decodes, 1, 1, max_blocks * block_size] additive
    prefills: list[_Prefill] = field(default_factory=list)
    _k_buffer: torch.Tensor | None = None
    _v_buffer: torch.Tensor | None = None

    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
    ) -> torch.Tensor:
        """Attention for one layer; the caller has already stored k/v in the cache."""
        if self.decode_all:
            return self._decode(q, k_cache, v_cache)
        out = torch.empty_like(q)
        if self.decode_rows is not None:
            out.index_copy_(
                0,
                self.decode_rows,
                self._decode(q.index_select(0, self.decode_rows), k_cache, v_cache),
            )
        for span in self.prefills:
            out[span.start : span.end] = self._prefill(span, q, k, v, k_cache, v_cache)
        return out

    def _decode(
        self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> torch.Tensor:
        assert (
            self.decode_blocks is not None and self.decode_mask is not None
        )  # set with decode rows
        rows = q.shape[0]
        block_size, kv_heads, head_dim = k_cache.shape[1], k_cache.shape[2], k_cache.shape[3]
        if self._k_buffer is None or self._v_buffer is None:
            # Allocated once per step: fresh large tensors every layer would cost page faults.
            shape = (self.decode_blocks.numel(), block_size, kv_heads, head_dim)
            self._k_buffer = torch.empty(shape, dtype=k_cache.dtype, device=k_cache.device)
            self._v_buffer = torch.empty(shape, dtype=v_cache.dtype, device=v_cache.device)
        torch.index_select(k_cache, 0, self.decode_blocks, out=self._k_buffer)
        torch.index_select(v_cache, 0, self.decode_blocks, out=self._v_buffer)
        k = self._k_buffer.view(rows, -1, kv_heads, head_dim).transpose(1, 2)
        v = self._v_buffer.view(rows, -1, kv_heads, head_dim).transpose(1, 2)
        out = F.scaled_dot_product_attention(
            q.unsqueeze(2), k, v, attn_mask=self.decode_mask, scale=self.scale, enable_gqa=True
        )
        return out.squeeze(2)

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
        else:
            keys = k_cache.index_select(0, span.blocks).view(-1, kv_heads, head_dim)[: span.context]
            values = v_cache.index_select(0, span.blocks).view(-1, kv_heads, head_dim)[
                : span.context
            ]
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
) -> CpuAttentionPlan:
    """Group a step's sequences into one batched decode call plus one call per prompt chunk."""
    decode_seqs = [i for i, n in enumerate(query_lens) if n == 1]
    plan = CpuAttentionPlan(num_tokens=sum(query_lens), scale=scale)
    starts = [0]
    for n in query_lens:
        starts.append(starts[-1] + n)
    if decode_seqs:
        plan.decode_all = len(decode_seqs) == len(query_lens)
        if not plan.decode_all:
            plan.decode_rows = torch.tensor([starts[i] for i in decode_seqs], device=device)
        width = max(-(-context_lens[i] // block_size) for i in decode_seqs)
        ids = [(block_tables[i][:width] + [0] * width)[:width] for i in decode_seqs]
        plan.decode_blocks = torch.tensor(ids, dtype=torch.long, device=device).view(-1)
        contexts = torch.tensor([context_lens[i] for i in decode_seqs], device=device)
        beyond = torch.arange(width * block_size, device=device)[None, :] >= contexts[:, None]
        plan.decode_mask = (
            torch.zeros(beyond.shape, dtype=mask_dtype, device=device)
            .masked_fill_(beyond, float("-inf"))
            .view(len(decode_seqs), 1, 1, -1)
        )
    for i, new in enumerate(query_lens):
        if new <= 1:
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
