"""RMSNorm, SiLU times up and rotary embeddings in C (``elementwise.c``), for the PyTorch layers
on the CPU.

In a profile of a prompt step of about a thousand tokens, these elementwise operators
(``F.silu``, the products, ``torch.roll`` and ``addcmul``) took about 130 ms of the 370 ms that
its PyTorch operators other than the matmuls took, each a pass over the step's activations; the
C versions make one pass each, on every thread, with the exponential in vectors. The fused step
runs the same functions.
"""

from __future__ import annotations

import ctypes

import torch

from backends.engine.weights.native.build import load

_void = ctypes.c_void_p


class Elementwise:
    """``rms_norm``, ``add_rms_norm``, ``silu_times`` and ``rotate_rows``; ``available()``
    builds them on first use."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._norm = library.rms_norm
        self._norm.restype = None
        self._norm.argtypes = [_void, _void, ctypes.c_float, ctypes.c_int, ctypes.c_int, _void]
        self._norm.argtypes += [ctypes.c_int]
        self._add_norm = library.add_rms_norm
        self._add_norm.restype = None
        self._add_norm.argtypes = [_void, _void, _void, ctypes.c_float, ctypes.c_int]
        self._add_norm.argtypes += [ctypes.c_int, _void, ctypes.c_int]
        self._silu = library.silu_times
        self._silu.restype = None
        self._silu.argtypes = [_void, ctypes.c_int, ctypes.c_int, _void, ctypes.c_int]
        self._rotate = library.rotate_rows
        self._rotate.restype = None
        self._rotate.argtypes = [_void, ctypes.c_long, *([ctypes.c_int] * 3), _void, _void]
        self._rotate.argtypes += [ctypes.c_int]

    @staticmethod
    def available() -> Elementwise | None:
        """The kernels, or None where they cannot be built (PyTorch's operators run instead)."""
        library = load("elementwise")
        return None if library is None else Elementwise(library)

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        """RMSNorm of x [rows, n] (contiguous float32) by weight [n] -> a new [rows, n]."""
        rows, n = x.shape
        out = torch.empty_like(x)
        threads = torch.get_num_threads()
        self._norm(x.data_ptr(), weight.data_ptr(), eps, rows, n, out.data_ptr(), threads)
        return out

    def add_rms_norm(
        self, x: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor, eps: float
    ) -> torch.Tensor:
        """x += delta in place (both [rows, n], contiguous float32), then RMSNorm of the sum by
        weight [n] -> a new [rows, n]."""
        rows, n = x.shape
        out = torch.empty_like(x)
        self._add_norm(
            x.data_ptr(),
            delta.data_ptr(),
            weight.data_ptr(),
            eps,
            rows,
            n,
            out.data_ptr(),
            torch.get_num_threads(),
        )
        return out

    def silu_times(self, gate_up: torch.Tensor, inter: int) -> torch.Tensor:
        """silu(gate) * up for gate_up [rows, 2 * inter] (contiguous float32) -> [rows, inter]."""
        rows = gate_up.shape[0]
        act = torch.empty((rows, inter), dtype=torch.float32)
        self._silu(gate_up.data_ptr(), rows, inter, act.data_ptr(), torch.get_num_threads())
        return act

    def rotate(
        self, x: torch.Tensor, heads: int, dim: int, cos: torch.Tensor, sin_signed: torch.Tensor
    ) -> None:
        """Rotate, in place, the first ``heads`` heads of each row of x [rows, width]
        (contiguous float32) by each row's cos and signed sin [rows, (1,) dim] (contiguous)."""
        rows, width = x.shape
        self._rotate(
            x.data_ptr(),
            width,
            rows,
            heads,
            dim,
            cos.data_ptr(),
            sin_signed.data_ptr(),
            torch.get_num_threads(),
        )
