"""Triton paged attention: prefill chunks and decodes of many sequences in one launch.

Each program takes one tile of ``BLOCK_Q`` consecutive new tokens of one sequence together with
all the query heads that share one KV head (GQA), so a tile is ``BLOCK_Q * heads_per_kv`` rows
and every key/value loaded from the cache serves all of them. Programs walk the sequence's keys
in tiles of ``TILE`` positions, finding each position's physical block through the block table
(so any cache block size works, 1 to 256), and keep a running max and sum for an online softmax
(FlashAttention). The mask is causal within the new chunk: new token ``i`` of a sequence with
``context_len`` tokens (``q_len`` of them new) sees keys ``0 .. context_len - q_len + i``.

The grid is sized from tensor shapes alone (``tokens // BLOCK_Q + seqs`` tiles, the surplus
programs exit at once), and each program finds its sequence by binary search over
``query_start_loc``, so nothing is read back to the host. vLLM's ``triton_unified_attention``
uses the same layout; this is a smaller kernel without its split-KV path for long decodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from backends.engine.model.triton_store import check_device, interpret_mode, require_triton

if TYPE_CHECKING:
    import torch

_KERNELS: dict[bool, Any] = {}
# Keys per inner-loop step; tl.dot needs at least 16 on each side.
_TILE = 32
_LOG2E = 1.4426950408889634


def _kernel() -> Any:
    interpret = interpret_mode()
    if interpret not in _KERNELS:
        require_triton()
        import triton
        import triton.language as tl

        def paged_attention_kernel(
            q_ptr,
            k_cache_ptr,
            v_cache_ptr,
            out_ptr,
            block_tables_ptr,
            query_start_ptr,
            context_lens_ptr,
            qk_scale_log2,
            num_seqs,
            q_stride_t,
            q_stride_h,
            o_stride_t,
            o_stride_h,
            kc_stride_b,
            kc_stride_s,
            kc_stride_h,
            vc_stride_b,
            vc_stride_s,
            vc_stride_h,
            bt_stride,
            HEAD_DIM: tl.constexpr,
            HEAD_DIM_PAD: tl.constexpr,
            QUERIES_PER_KV: tl.constexpr,
            QPK_PAD: tl.constexpr,
            BLOCK_Q: tl.constexpr,
            BLOCK_M: tl.constexpr,
            BLOCK_SIZE: tl.constexpr,
            TILE: tl.constexpr,
        ):
            q_tile = tl.program_id(0)
            kv_head = tl.program_id(1)

            # Sequence s owns tiles from query_start[s] // BLOCK_Q + s on: find the last s
            # whose first tile is at or before ours.
            # Scalars as int32 tensors, not Python ints: they are loop-carried below.
            lo = tl.full([], 0, tl.int32)
            hi = tl.full([], 0, tl.int32) + num_seqs
            while lo < hi:
                mid = (lo + hi) // 2
                first_tile = tl.load(query_start_ptr + mid) // BLOCK_Q + mid
                if first_tile <= q_tile:
                    lo = mid + 1
                else:
                    hi = mid
            seq = lo - 1

            q_start = tl.load(query_start_ptr + seq)
            q_len = tl.load(query_start_ptr + seq + 1) - q_start
            local_tile = q_tile - (q_start // BLOCK_Q + seq)
            if local_tile * BLOCK_Q >= q_len:
                return
            prefix = tl.load(context_lens_ptr + seq) - q_len

            rows = tl.arange(0, BLOCK_M)
            q_pos = local_tile * BLOCK_Q + rows // QPK_PAD
            head_in_group = rows % QPK_PAD
            head = kv_head * QUERIES_PER_KV + head_in_group
            row_ok = (q_pos < q_len) & (head_in_group < QUERIES_PER_KV)
            dims = tl.arange(0, HEAD_DIM_PAD)
            dim_ok = dims < HEAD_DIM
            token = (q_start + q_pos).to(tl.int64)

            q = tl.load(
                q_ptr + token[:, None] * q_stride_t + head[:, None] * q_stride_h + dims[None, :],
                mask=row_ok[:, None] & dim_ok[None, :],
                other=0.0,
            )
            visible = prefix + q_pos  # the last key position each row may see

            m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
            l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
            acc = tl.zeros([BLOCK_M, HEAD_DIM_PAD], dtype=tl.float32)
            last_q = tl.minimum(local_tile * BLOCK_Q + BLOCK_Q, q_len) - 1
            num_keys = prefix + last_q + 1
            for tile in range(0, tl.cdiv(num_keys, TILE)):
                keys = tile * TILE + tl.arange(0, TILE)
                key_ok = keys < num_keys
                block = tl.load(
                    block_tables_ptr + seq * bt_stride + keys // BLOCK_SIZE, mask=key_ok, other=0
                ).to(tl.int64)
                offset = keys % BLOCK_SIZE
                k = tl.load(
                    k_cache_ptr
                    + block[None, :] * kc_stride_b
                    + offset[None, :] * kc_stride_s
                    + kv_head * kc_stride_h
                    + dims[:, None],
                    mask=key_ok[None, :] & dim_ok[:, None],
                    other=0.0,
                )
                s = tl.dot(q, k) * qk_scale_log2
                s = tl.where(
                    row_ok[:, None] & key_ok[None, :] & (keys[None, :] <= visible[:, None]),
                    s,
                    float("-inf"),
                )
                m_new = tl.maximum(m_i, tl.max(s, 1))
                # Rows that have seen no key yet (padding rows) stay at -inf: shift by 0 then.
                m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
                p = tl.exp2(s - m_safe[:, None])
                alpha = tl.exp2(m_i - m_safe)
                l_i = l_i * alpha + tl.sum(p, 1)
                v = tl.load(
                    v_cache_ptr
                    + block[:, None] * vc_stride_b
                    + offset[:, None] * vc_stride_s
                    + kv_head * vc_stride_h
                    + dims[None, :],
                    mask=key_ok[:, None] & dim_ok[None, :],
                    other=0.0,
                )
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
                m_i = m_new

            acc = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
            tl.store(
                out_ptr + token[:, None] * o_stride_t + head[:, None] * o_stride_h + dims[None, :],
                acc.to(out_ptr.dtype.element_ty),
                mask=row_ok[:, None] & dim_ok[None, :],
            )

        # The sequence count changes every step: one compiled kernel for all its values.
        _KERNELS[interpret] = triton.jit(paged_attention_kernel, do_not_specialize=["num_seqs"])
    return _KERNELS[interpret]


def paged_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_start_loc: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Attention of the new tokens ``q`` ([tokens, heads, head_dim]) over the paged KV cache.

    ``k_cache``/``v_cache``: [blocks, block_size, kv_heads, head_dim], already holding the new
    tokens' keys and values; ``block_tables``: [seqs, max_blocks] int32; ``query_start_loc``:
    [seqs + 1] int32 cumulative new-token counts; ``context_lens``: [seqs] int32, cached + new.
    Returns [tokens, heads, head_dim] in q's dtype.
    """
    import torch

    check_device(q, k_cache, v_cache, block_tables, query_start_loc, context_lens)
    num_tokens, num_heads, head_dim = q.shape
    _, block_size, kv_heads, cache_dim = k_cache.shape
    num_seqs = block_tables.shape[0]
    _check_shapes(q, k_cache, v_cache, block_tables, query_start_loc, context_lens)
    if num_heads % kv_heads or cache_dim != head_dim:
        raise ValueError(
            f"paged_attention: {num_heads} heads of {head_dim} over {kv_heads} KV heads "
            f"of {cache_dim}"
        )
    out = torch.empty_like(q)
    if num_tokens == 0 or num_seqs == 0:
        return out

    meta = launch_meta(num_tokens, num_seqs, num_heads, kv_heads, head_dim, block_size)
    grid = (num_tokens // meta["BLOCK_Q"] + num_seqs, kv_heads)
    _kernel()[grid](
        q,
        k_cache,
        v_cache,
        out,
        block_tables,
        query_start_loc,
        context_lens,
        scale * _LOG2E,
        num_seqs,
        q.stride(0),
        q.stride(1),
        out.stride(0),
        out.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        v_cache.stride(0),
        v_cache.stride(1),
        v_cache.stride(2),
        block_tables.stride(0),
        **meta,
    )
    return out


def launch_meta(
    num_tokens: int, num_seqs: int, num_heads: int, kv_heads: int, head_dim: int, block_size: int
) -> dict[str, int]:
    """The kernel's compile-time constants for a batch of this shape."""
    import triton

    queries_per_kv = num_heads // kv_heads
    qpk_pad = triton.next_power_of_2(queries_per_kv)
    # Every scheduled sequence brings at least one new token, so tokens == seqs means a batch of
    # decodes: small tiles then; bigger ones amortise the key loads over prefill rows.
    block_m = max(16 if num_tokens == num_seqs else 64, qpk_pad)
    return {
        "HEAD_DIM": head_dim,
        "HEAD_DIM_PAD": max(16, triton.next_power_of_2(head_dim)),
        "QUERIES_PER_KV": queries_per_kv,
        "QPK_PAD": qpk_pad,
        "BLOCK_Q": block_m // qpk_pad,
        "BLOCK_M": block_m,
        "BLOCK_SIZE": block_size,
        "TILE": _TILE,
    }


def _check_shapes(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_start_loc: torch.Tensor,
    context_lens: torch.Tensor,
) -> None:
    """Layout checks the kernel relies on (it reads raw pointers with these strides)."""
    num_seqs = block_tables.shape[0]
    if q.dim() != 3 or q.stride(2) != 1:
        raise ValueError("paged_attention: q must be [tokens, heads, head_dim], last dim dense")
    if k_cache.shape != v_cache.shape or k_cache.stride(3) != 1 or v_cache.stride(3) != 1:
        raise ValueError("paged_attention: caches must match, [blocks, block, kv_heads, dim]")
    if k_cache.dtype != q.dtype or v_cache.dtype != q.dtype:
        raise ValueError(f"paged_attention: q is {q.dtype}, caches {k_cache.dtype}")
    if block_tables.dim() != 2 or block_tables.stride(1) != 1:
        raise ValueError("paged_attention: block_tables must be [seqs, max_blocks], rows dense")
    if query_start_loc.shape != (num_seqs + 1,) or context_lens.shape != (num_seqs,):
        raise ValueError(
            f"paged_attention: {num_seqs} block tables, {tuple(query_start_loc.shape)} query "
            f"starts, {tuple(context_lens.shape)} context lengths"
        )
