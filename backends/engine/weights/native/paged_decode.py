"""Decode attention over the paged KV pool in C (``paged_decode.c``), called through ctypes.

Decode rows and short query runs (tokens a grammar forced) alike: a few new tokens per sequence.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch

from backends.engine.weights.native.build import load

_float_p = ctypes.POINTER(ctypes.c_float)
# paged_decode.c's MAX_KV: the widest token (kv_heads * dim) of a float16 pool it reads.
HALF_MAX_KV = 1024
_int_p = ctypes.POINTER(ctypes.c_int32)


class PagedDecode:
    """``paged_decode`` with its argument types; ``available()`` builds it on first use."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._run = library.paged_decode
        self._run.restype = ctypes.c_int
        self._run.argtypes = [
            _float_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            _int_p,
            _int_p,
            _int_p,
            _float_p,
            _float_p,
            *([ctypes.c_int] * 6),
            ctypes.c_float,
            ctypes.c_int,
            ctypes.c_int,
        ]
        self._half = bool(library.paged_decode_half())
        self._scratch = library.paged_decode_scratch
        self._scratch.restype = ctypes.c_long
        self._scratch.argtypes = [ctypes.c_int, _int_p, _int_p, ctypes.c_int, ctypes.c_int]

    def reads_half(self, kv_heads: int, dim: int) -> bool:
        """Whether a float16 pool of this shape is read here (F16C, and a token's keys within
        the kernel's MAX_KV floats)."""
        return self._half and kv_heads * dim <= HALF_MAX_KV

    @staticmethod
    def available() -> PagedDecode | None:
        """The kernel, or None where it cannot be built (the PyTorch path is used instead)."""
        library = load("paged_decode")
        return None if library is None else PagedDecode(library)

    def plan(
        self,
        tables: list[list[int]],
        lengths: list[int],
        heads: int,
        dim: int,
        query_lens: list[int] | None = None,
    ) -> DecodeCall:
        """The per-step arguments, shared by every layer: block tables, lengths, buffers.

        ``query_lens``: each sequence's new tokens (the last ones of its context); one each if
        unset."""
        width = max(len(t) for t in tables)
        table = torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.int32)
        length = torch.tensor(lengths, dtype=torch.int32)
        starts = [0]
        for n in query_lens or [1] * len(lengths):
            starts.append(starts[-1] + n)
        start = torch.tensor(starts, dtype=torch.int32)
        floats = self._scratch(len(lengths), _ints(start), _ints(length), heads, dim)
        scratch = torch.empty(int(floats), dtype=torch.float32)
        out = torch.empty((starts[-1], heads, dim), dtype=torch.float32)
        return DecodeCall(self, table, start, length, scratch, out)


@dataclass(slots=True)
class DecodeCall:
    """One step's decode attention: call it once per layer with that layer's query and pools."""

    kernel: PagedDecode
    tables: torch.Tensor  # [seqs, width] int32
    starts: torch.Tensor  # [seqs + 1] int32: each sequence's first row in q
    lengths: torch.Tensor  # [seqs] int32
    scratch: torch.Tensor
    out: torch.Tensor  # [tokens, heads, dim], rewritten by each call

    def __call__(
        self, q: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor, scale: float
    ) -> torch.Tensor:
        """q [tokens, heads, dim] float32 -> attention output, the same shape (a fresh tensor)."""
        q = q.contiguous()
        _tokens, heads, dim = q.shape
        seqs = self.lengths.shape[0]
        block_size, kv_heads = k_pool.shape[1], k_pool.shape[2]
        status = self.kernel._run(
            _floats(q),
            k_pool.data_ptr(),
            v_pool.data_ptr(),
            _ints(self.tables),
            _ints(self.starts),
            _ints(self.lengths),
            _floats(self.out),
            _floats(self.scratch),
            seqs,
            self.tables.shape[1],
            heads,
            kv_heads,
            dim,
            block_size,
            scale,
            torch.get_num_threads(),
            int(k_pool.dtype == torch.float16),
        )
        if status != 0:
            raise ValueError(f"paged_decode cannot run q {tuple(q.shape)} over {kv_heads} KV heads")
        return self.out.clone()


def _floats(tensor: torch.Tensor) -> ctypes._Pointer[ctypes.c_float]:
    return ctypes.cast(tensor.data_ptr(), _float_p)


def _ints(tensor: torch.Tensor) -> ctypes._Pointer[ctypes.c_int32]:
    return ctypes.cast(tensor.data_ptr(), _int_p)
