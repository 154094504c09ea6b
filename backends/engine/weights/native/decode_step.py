"""Every decoder layer of a short step in one C call (``decode_step.c``), through ctypes.

The caller hands over the tensors once (:meth:`DecodeStepKernel.bind`): 4-bit (or bfloat16)
projections, norms, rotary tables and K/V pools. Each step then costs one call for all layers
instead of hundreds of PyTorch operators.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch

from backends.engine.weights.native.build import load
from backends.engine.weights.native.group_matmul import GroupMatmul
from backends.engine.weights.native.paged_decode import DecodeCall

_void = ctypes.c_void_p
WORKSPACE_ROWS = 64


class _Projection(ctypes.Structure):
    _fields_ = [
        ("packed", _void),
        ("scale", _void),
        ("low", _void),
        ("wide", _void),
        ("wide_scale", _void),
        ("wide_low", _void),
        ("bf16", _void),
        ("bias", _void),
        ("down", _void),
        ("up", _void),
        ("out", ctypes.c_int),
        ("cols", ctypes.c_int),
        ("rank", ctypes.c_int),
    ]


class _Layer(ctypes.Structure):
    _fields_ = [
        ("input_norm", _void),
        ("post_norm", _void),
        ("qkv", _Projection),
        ("o", _Projection),
        ("gate_up", _Projection),
        ("down", _Projection),
        ("k_pool", _void),
        ("v_pool", _void),
    ]


class _Model(ctypes.Structure):
    _fields_ = [
        ("layers", ctypes.POINTER(_Layer)),
        ("cos", _void),
        ("sin_signed", _void),
        *[
            (name, ctypes.c_int)
            for name in (
                "num_layers",
                "hidden",
                "heads",
                "kv_heads",
                "dim",
                "intermediate",
                "block_size",
                "max_rank",
                "kv_half",
            )
        ],
        ("eps", ctypes.c_float),
        ("scale", ctypes.c_float),
    ]


class _Attention(ctypes.Structure):
    _fields_ = [
        ("tables", _void),
        ("starts", _void),
        ("lengths", _void),
        ("scratch", _void),
        ("seqs", ctypes.c_int),
        ("width", ctypes.c_int),
    ]


@dataclass(slots=True)
class Projection:
    """One 4-bit projection as Int4Linear holds it (GroupMatmul.pack layout), or a bfloat16 one
    as Bf16Linear holds it (``bf16``; the group tensors None)."""

    packed: torch.Tensor | None  # uint8 [out, cols / 32, 16]
    scale: torch.Tensor | None  # float32 [out, cols / 32]
    low: torch.Tensor | None
    bias: torch.Tensor | None = None  # float32 [out]
    down: torch.Tensor | None = None  # LoRA float32 [rank, cols]
    up: torch.Tensor | None = None  # float32 [out, rank]
    # The same groups as WideGroups holds them (WideMatmul.pack4 and pack_scales), or None.
    wide: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
    bf16: torch.Tensor | None = None  # int16 bits of bfloat16 [out / 16, cols / 2, 16, 2]

    def shape(self) -> tuple[int, int]:
        """The weight's [out, cols]."""
        if self.bf16 is not None:
            return self.bf16.shape[0] * 16, self.bf16.shape[1] * 2
        if self.scale is None:
            raise ValueError("a projection needs 4-bit groups or bfloat16 weights")
        out, groups = self.scale.shape
        return out, groups * 32


@dataclass(slots=True)
class LayerTensors:
    """One decoder layer: its norms, its four projections and its K/V pools."""

    input_norm: torch.Tensor
    post_norm: torch.Tensor
    qkv: Projection
    o: Projection
    gate_up: Projection
    down: Projection
    k_pool: torch.Tensor  # float32 or float16 [blocks, block_size, kv_heads, dim]
    v_pool: torch.Tensor


@dataclass(slots=True)
class Shape:
    """The model's sizes and constants the kernel needs."""

    hidden: int
    heads: int
    kv_heads: int
    dim: int
    intermediate: int
    eps: float
    scale: float


class DecodeStepKernel:
    """``decode_step``; ``available()`` builds it on first use."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._run = library.decode_step
        self._run.restype = ctypes.c_int
        self._run.argtypes = [ctypes.POINTER(_Model), _void, ctypes.c_int, _void, _void]
        self._run.argtypes += [ctypes.POINTER(_Attention), _void, ctypes.c_int, _void, ctypes.c_int]
        self._workspace = library.decode_step_workspace
        self._workspace.restype = ctypes.c_long
        self._workspace.argtypes = [ctypes.POINTER(_Model), ctypes.c_int]

    @staticmethod
    def available() -> DecodeStepKernel | None:
        """The kernel, or None where it cannot be built or this CPU lacks AVX2 and FMA."""
        if GroupMatmul.available() is None:
            return None
        library = load("decode_step")
        return None if library is None else DecodeStepKernel(library)

    def bind(
        self,
        shape: Shape,
        layers: list[LayerTensors],
        cos: torch.Tensor,
        sin_signed: torch.Tensor,
        max_rows: int,
        takes_prompts: bool = False,
    ) -> BoundStep:
        """The kernel over these tensors (kept alive by the result), for steps of up to
        ``max_rows`` rows; ``takes_prompts``: prompt chunks come here too."""
        keep: list[torch.Tensor] = []

        def pointer(tensor: torch.Tensor | None, dtype: torch.dtype = torch.float32) -> int | None:
            if tensor is None:
                return None
            if tensor.dtype != dtype or not tensor.is_contiguous() or tensor.device.type != "cpu":
                raise ValueError(f"decode_step needs contiguous CPU {dtype}, got {tensor.dtype}")
            keep.append(tensor)
            return tensor.data_ptr()

        def projection(p: Projection) -> _Projection:
            rank = 0 if p.down is None else p.down.shape[0]
            out, cols = p.shape()
            wide, wide_scale, wide_low = p.wide or (None, None, None)
            return _Projection(
                pointer(p.packed, torch.uint8),
                pointer(p.scale),
                pointer(p.low),
                pointer(wide, torch.uint8),
                pointer(wide_scale),
                pointer(wide_low),
                pointer(p.bf16, torch.int16),
                pointer(p.bias),
                pointer(p.down),
                pointer(p.up),
                out,
                cols,
                rank,
            )

        array = (_Layer * len(layers))()
        ranks = [0]
        for index, layer in enumerate(layers):
            projections = (layer.qkv, layer.o, layer.gate_up, layer.down)
            ranks += [0 if p.down is None else p.down.shape[0] for p in projections]
            array[index] = _Layer(
                pointer(layer.input_norm),
                pointer(layer.post_norm),
                *[projection(p) for p in projections],
                pointer(layer.k_pool, layer.k_pool.dtype),
                pointer(layer.v_pool, layer.k_pool.dtype),
            )
        block_size = layers[0].k_pool.shape[1]
        model = _Model(
            array,
            pointer(cos),
            pointer(sin_signed),
            len(layers),
            shape.hidden,
            shape.heads,
            shape.kv_heads,
            shape.dim,
            shape.intermediate,
            block_size,
            max(ranks),
            int(layers[0].k_pool.dtype == torch.float16),
            shape.eps,
            shape.scale,
        )
        return BoundStep(self, model, array, keep, max_rows, takes_prompts)

    def workspace_bytes(self, model: _Model, rows: int) -> int:
        """Bytes of workspace a step of ``rows`` rows needs."""
        return int(self._workspace(ctypes.byref(model), rows))


class BoundStep:
    """The kernel bound to one model's tensors: call it once per short step."""

    def __init__(
        self,
        kernel: DecodeStepKernel,
        model: _Model,
        layers: ctypes.Array[_Layer],
        keep: list[torch.Tensor],
        max_rows: int,
        takes_prompts: bool,
    ) -> None:
        self._kernel = kernel
        self._model = model
        self._layers = layers  # the structs model.layers points into
        self._keep = keep
        self.max_rows = max_rows
        # Whether prompt chunks come here too (their attention tiled in the same kernel).
        self.takes_prompts = takes_prompts
        # Sized for the widest step so far, in steps of WORKSPACE_ROWS rows: a decode batch
        # needs little, a prompt chunk of 2,048 tokens about 70 MB.
        self._workspace = torch.empty(0, dtype=torch.uint8)
        self._rows = 0

    def _workspace_for(self, rows: int) -> torch.Tensor:
        if rows > self._rows:
            self._rows = -(-rows // WORKSPACE_ROWS) * WORKSPACE_ROWS
            size = self._kernel.workspace_bytes(self._model, self._rows)
            self._workspace = torch.empty(size, dtype=torch.uint8)
        return self._workspace

    def __call__(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        call: DecodeCall,
        kept_rows: torch.Tensor | None = None,
    ) -> bool:
        """Run every layer over x [rows, hidden] (embeddings in, hidden states out) in place.

        positions [rows] int32, slots [rows] int64; ``call`` is the step's attention plan.
        ``kept_rows`` (ascending row indices): every row's keys and values are stored, and only
        these rows' hidden states are computed, into x's first len(kept_rows) rows. False (x
        untouched) where the step is outside what the kernel handles."""
        rows = x.shape[0]
        if rows > self.max_rows or x.dtype != torch.float32 or not x.is_contiguous():
            return False
        kept = None if kept_rows is None else kept_rows.to(torch.int32).contiguous()
        attention = _Attention(
            call.tables.data_ptr(),
            call.starts.data_ptr(),
            call.lengths.data_ptr(),
            call.scratch.data_ptr(),
            call.lengths.shape[0],
            call.tables.shape[1],
        )
        status = self._kernel._run(
            ctypes.byref(self._model),
            x.data_ptr(),
            rows,
            positions.data_ptr(),
            slots.data_ptr(),
            ctypes.byref(attention),
            self._workspace_for(rows).data_ptr(),
            torch.get_num_threads(),
            None if kept is None else kept.data_ptr(),
            -1 if kept is None else kept.shape[0],
        )
        return status == 0
