"""Weight storage for the engine's projections: float, or weight-only int8/int4 (torch kernels).

``int8`` is symmetric, one scale per output channel (``_weight_int8pack_mm``); ``int4`` is
asymmetric in groups of 32 along the input dimension, one scale and one zero per group
(``_weight_int4pack_mm_for_cpu``, the layout gpt-fast and torchao use). Both kernels take
bfloat16 activations: with float32 activations they fall back to a scalar loop that is 10-30x
slower on an AVX2 CPU, so the quantized layers round their input to bfloat16 and return float32.
GGUF Q4_0/Q4_1 blocks are 32 weights with a scale (and a minimum), which is exactly int4pack's
group layout, so those load without requantizing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from agent.errors import UserError
from backends.engine.weights.bf16_linear import Bf16Linear
from backends.engine.weights.float32_gemm import float32_linear
from backends.engine.weights.wide_groups import WideGroups

if TYPE_CHECKING:
    from backends.engine.weights.native.group_matmul import GroupMatmul

# float16 is there for the ``dtype = "float16"`` of GPU set-ups, which sets weights too.
WEIGHT_CHOICES = ("float32", "int4-decode", "bfloat16", "int8", "int4", "float16")
QUANTIZED = ("int8", "int4")
# float32 weights for prompt chunks and wide steps, the file's own 4-bit (and 8-bit head) groups
# with int16 activations for decode steps (:class:`DualLinear`): faster decode, not float32's
# numerics (a greedy continuation drifts from float32's once a near tie flips).
INT4_DECODE = "int4-decode"


def float_weights(weights: str) -> str:
    """The float dtype's name of a choice's float copy (int4-decode keeps float32 for prompts)."""
    return "float32" if weights == INT4_DECODE else weights


GROUP = 32
BF16_ROWS = 64  # bfloat16 matmuls on the CPU run this many rows at a time (FloatLinear)


@dataclass(slots=True)
class GroupQuantized:
    """4-bit weights as a GGUF Q4_0/Q4_1 file stores them: w = q * scale + low, 32 per group.

    A LoRA adapter on top stays as its factors (``w + up @ down``), so the 4-bit groups remain
    the file's own and the delta runs as two thin matmuls beside them, as llama.cpp applies one.
    """

    q: torch.Tensor  # uint8 [rows, cols], values 0..15
    scale: torch.Tensor  # float32 [rows, cols / 32]
    low: torch.Tensor  # float32 [rows, cols / 32]
    down: torch.Tensor | None = None  # float32 [rank, cols]: the adapter's lora_a
    up: torch.Tensor | None = None  # float32 [rows, rank]: lora_b, times alpha / rank

    @property
    def shape(self) -> torch.Size:
        """The weight's [rows, cols]."""
        return self.q.shape

    def dequantize(self) -> torch.Tensor:
        """The float32 weights the blocks encode (with the adapter's delta merged in)."""
        rows, cols = self.q.shape
        grouped = self.q.reshape(rows, cols // GROUP, GROUP).float()
        weight = (grouped * self.scale[..., None] + self.low[..., None]).reshape(rows, cols)
        if self.down is not None and self.up is not None:
            weight += self.up @ self.down
        return weight

    def map_rows(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> GroupQuantized:
        """The same weights with ``fn`` (a row permutation) applied to every part."""
        up = None if self.up is None else fn(self.up)
        return GroupQuantized(fn(self.q), fn(self.scale), fn(self.low), self.down, up)

    @staticmethod
    def cat(parts: list[GroupQuantized]) -> GroupQuantized:
        """Row-wise concatenation (q|k|v, gate|up); the adapters' factors stack block-diagonally."""
        down, up = None, None
        if any(p.down is not None for p in parts):
            downs = [p.down for p in parts if p.down is not None]
            down = torch.cat(downs)
            up = torch.zeros(sum(p.shape[0] for p in parts), down.shape[0])
            row, col = 0, 0
            for p in parts:
                if p.up is not None:
                    up[row : row + p.shape[0], col : col + p.up.shape[1]] = p.up
                    col += p.up.shape[1]
                row += p.shape[0]
        return GroupQuantized(
            torch.cat([p.q for p in parts]),
            torch.cat([p.scale for p in parts]),
            torch.cat([p.low for p in parts]),
            down,
            up,
        )


Weight = torch.Tensor | GroupQuantized


def dense(value: Weight) -> torch.Tensor:
    """A norm, bias or rotary table, which the loaders always yield as a float tensor."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"expected a float tensor, got {type(value).__name__}")
    return value


def check_weights(name: str, device: str) -> str:
    """A valid weight choice for ``device``, or a UserError that says what to write."""
    if name not in WEIGHT_CHOICES:
        raise UserError(f"engine weights {name!r}: choose one of {', '.join(WEIGHT_CHOICES)}")
    if (name in QUANTIZED or name == INT4_DECODE) and device != "cpu":
        raise UserError(
            f'engine weights {name!r} run on the CPU only: set weights = "bfloat16" for {device}'
        )
    return name


class FloatLinear(nn.Module):
    """``F.linear`` over float32 or bfloat16 weights, in the weights' dtype."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [T, in] -> [T, out] in x's dtype.

        bfloat16 on the CPU runs in chunks of exactly ``BF16_ROWS`` rows, the last one padded
        with zeros. oneDNN picks its bfloat16 kernel and blocking by the number of rows, and the
        sums, rounded to bfloat16, then differ by row count (seen: with AMX, at most row counts
        from 1 to 200 for some shapes; with AVX512-BF16 alone, one row against many), which
        flips greedy tokens between a sequence decoded alone and in a batch. With the row count
        fixed, every row's result is the same in any batch at any position (checked for every
        projection shape of the bundled model: 1-39, 63-65, 128 and 200 rows against 300).
        Measured with AMX, over the model's projection shapes: one row costs 1.2x an unpadded
        one, 512 rows 2x (still faster than float32 GEMM there)."""
        if self.weight.dtype != torch.bfloat16 or self.weight.device.type != "cpu":
            return self._linear(x)
        rows = x.shape[0]
        pad = -rows % BF16_ROWS
        if pad:
            x = torch.cat((x, x.new_zeros(pad, x.shape[1])))
        return torch.cat([self._linear(chunk) for chunk in x.split(BF16_ROWS)])[:rows]

    def _linear(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == self.weight.dtype == torch.float32 and x.device.type == "cpu":
            return float32_linear(x, self.weight, self.bias)
        if x.dtype == self.weight.dtype:
            return F.linear(x, self.weight, self.bias)
        bias = None if self.bias is None else self.bias.to(self.weight.dtype)
        return F.linear(x.to(self.weight.dtype), self.weight, bias).to(x.dtype)


class Int8Linear(nn.Module):
    """Weight-only int8, one scale per output channel, on ``_weight_int8pack_mm``."""

    def __init__(self, q: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.q = nn.Parameter(q, requires_grad=False)
        self.scales = nn.Parameter(scales.float(), requires_grad=False)  # float32, for lookups
        self.kernel_scales = nn.Parameter(scales.bfloat16(), requires_grad=False)
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)

    @classmethod
    def quantize(cls, weight: torch.Tensor, bias: torch.Tensor | None = None) -> Int8Linear:
        """Round float weights [out, in] to int8 with each row's scale = max |w| / 127."""
        weight = weight.float()
        scales = weight.abs().amax(dim=1).clamp(min=1e-12) / 127
        q = torch.round(weight / scales[:, None]).clamp(-127, 127).to(torch.int8)
        return cls(q, scales, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [T, in] -> [T, out] in x's dtype."""
        out = torch.ops.aten._weight_int8pack_mm(x.bfloat16(), self.q, self.kernel_scales)
        out = out.to(x.dtype)
        return out if self.bias is None else out + self.bias

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """Dequantized rows ``ids`` (the embedding lookup of a tied LM head), float32."""
        return self.q.index_select(0, ids).float() * self.scales.index_select(0, ids)[:, None]


class Int4Linear(nn.Module):
    """Weight-only int4, groups of 32 with a scale and a low value each.

    On an AVX2 CPU where the engine's C kernel builds
    (:mod:`backends.engine.weights.native.group_matmul`)
    the groups stay as the file stores them and the activations are rounded to int16 per group of
    32; otherwise ``_weight_int4pack_mm_for_cpu`` runs them with bfloat16
    activations. ``native=False`` forces the PyTorch kernel.
    """

    def __init__(
        self, weight: GroupQuantized, bias: torch.Tensor | None = None, native: bool = True
    ) -> None:
        super().__init__()
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)
        self.down = None if weight.down is None else nn.Parameter(weight.down, requires_grad=False)
        self.up = None if weight.up is None else nn.Parameter(weight.up, requires_grad=False)
        self.kernel = group_kernel() if native else None
        self.columns: WideGroups | None = None
        if self.kernel is not None:
            self.packed = nn.Parameter(self.kernel.pack(weight.q), requires_grad=False)
            self.scale = nn.Parameter(weight.scale.float().contiguous(), requires_grad=False)
            self.low = nn.Parameter(weight.low.float().contiguous(), requires_grad=False)
            self.columns = WideGroups.of4(weight.q, weight.scale, weight.low)
            return
        # The kernel computes (q - 8) * scale + zero, so zero = low + 8 * scale: exact for Q4_x.
        scale_zero = torch.stack((weight.scale, weight.low + 8 * weight.scale), dim=-1)
        self.packed = nn.Parameter(
            torch.ops.aten._convert_weight_to_int4pack_for_cpu(weight.q.to(torch.int32), 1),
            requires_grad=False,
        )
        self.scale_zero = nn.Parameter(
            scale_zero.transpose(0, 1).contiguous().bfloat16(), requires_grad=False
        )

    @staticmethod
    def quantize(weight: torch.Tensor) -> GroupQuantized:
        """Round float weights [out, in] to 16 levels between each group's min and max."""
        rows, cols = weight.shape
        grouped = weight.float().reshape(rows, cols // GROUP, GROUP)
        low, high = grouped.amin(dim=-1), grouped.amax(dim=-1)
        scale = ((high - low) / 15).clamp(min=1e-12)
        q = torch.round((grouped - low[..., None]) / scale[..., None]).clamp(0, 15)
        return GroupQuantized(q.reshape(rows, cols).to(torch.uint8), scale, low)

    def dequantize(self) -> torch.Tensor:
        """The float32 weights [out, in] (with the adapter's delta), from the C kernel's layout."""
        if self.kernel is None:
            raise TypeError("only the C kernel's layout can be dequantized")
        packed = self.packed.data  # [out, groups, 16]: q[j] | q[j + 16] << 4
        q = torch.cat((packed & 0x0F, packed >> 4), dim=-1).reshape(packed.shape[0], -1)
        return GroupQuantized(q, self.scale, self.low, self.down, self.up).dequantize()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [T, in] -> [T, out] in x's dtype."""
        if self.columns is not None:
            out = self.columns(x.float()).to(x.dtype)
        elif self.kernel is not None:
            out = self.kernel.q4(x.float(), self.packed, self.scale, self.low).to(x.dtype)
        else:
            out = torch.ops.aten._weight_int4pack_mm_for_cpu(
                x.bfloat16(), self.packed, GROUP, self.scale_zero
            ).to(x.dtype)
        if self.down is not None and self.up is not None:
            out = out + F.linear(F.linear(x.float(), self.down), self.up).to(x.dtype)
        return out if self.bias is None else out + self.bias


class DualLinear(nn.Module):
    """A float projection that runs narrow steps on 4-bit (or 8-bit) copies of the same weights
    (the ``int4-decode`` choice).

    A GGUF Q4_0/Q4_1 (Q8_0) file's float32 weights are its groups dequantized, so the C kernel
    over those groups computes nearly the same product (to about 4e-5 of the output's scale: it
    rounds activations to int16) while reading an eighth of the bytes. Decode steps, a few rows
    each, are bound by reading the weights and take the 4-bit path; prompt chunks and wide
    batches, bound by arithmetic, take float32 GEMM, so prompt logits keep float32's exactness.
    Decoded tokens do not: the rounding moves logits by about 1e-2, which flips near ties, so a
    greedy continuation drifts from float32's (``weights = "float32"`` never takes this path).
    (Where the CPU
    has AVX-512 VNNI the engine defaults to int4 over the same groups instead, which runs every
    width on them: :func:`backends.engine.model.loader.file_weights`.) Costs the 4-bit copy in
    memory (about 15% more).

    With ``wide=None`` the float copy is built from the 4-bit one on the first wide step: a
    process that only decodes (an agent's later turns, served from the prefix cache) never pays
    for it, at load or in memory.
    """

    def __init__(
        self, wide: FloatLinear | None, narrow: Int4Linear | Int8GroupLinear, max_rows: int
    ) -> None:
        super().__init__()
        self.wide = wide
        self.narrow = narrow
        self.max_rows = max_rows

    @property
    def weight(self) -> torch.Tensor:
        """The float weights (the embedding of a tied head reads them)."""
        return self._wide().weight

    def forward(self, x: torch.Tensor, step_rows: int | None = None) -> torch.Tensor:
        """x [T, in] -> [T, out] in x's dtype. ``step_rows``, where x is some rows of a wider
        step (the last layer's kept rows), picks the path by the step's width instead: a prompt
        chunk's rows keep float32 GEMM."""
        rows = x.shape[0] if step_rows is None else step_rows
        return self.narrow(x) if rows <= self.max_rows else self._wide()(x)

    def _wide(self) -> FloatLinear:
        if self.wide is None:
            if not isinstance(self.narrow, Int4Linear):
                raise TypeError("an 8-bit narrow copy is built with its float weights")
            bias = self.narrow.bias
            self.wide = FloatLinear(
                self.narrow.dequantize(), None if bias is None else bias.detach()
            )
        return self.wide


class Int8GroupLinear(nn.Module):
    """8-bit weights with one scale per group of 32 (GGUF Q8_0), on the C kernel."""

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, kernel: GroupMatmul) -> None:
        super().__init__()
        self.q = nn.Parameter(q.contiguous(), requires_grad=False)
        self.scale = nn.Parameter(scale.float().contiguous(), requires_grad=False)
        self.kernel = kernel
        self.columns = WideGroups.of8(self.q.data, self.scale.data)

    @classmethod
    def exactly(cls, weight: torch.Tensor, kernel: GroupMatmul) -> Int8GroupLinear | None:
        """The weights as 8-bit groups if that loses nothing (a dequantized Q8_0 tensor), else
        None."""
        rows, cols = weight.shape
        if cols % GROUP:
            return None
        q = torch.empty((rows, cols), dtype=torch.int8)
        scale = torch.empty((rows, cols // GROUP))
        # A slice at a time, so the temporaries stay in cache: 0.07 s for the bundled model's
        # 49152x576 head where the whole tensor at once took 0.3 s of every start.
        for start in range(0, rows, _EXACT_ROWS):
            end = min(rows, start + _EXACT_ROWS)
            grouped = weight[start:end].float().reshape(end - start, cols // GROUP, GROUP)
            part = grouped.abs().amax(dim=-1) / 127
            codes = torch.round(grouped / part.clamp(min=1e-30)[..., None]).clamp(-127, 127)
            if not torch.equal(codes * part[..., None], grouped):
                return None
            q[start:end] = codes.reshape(end - start, cols).to(torch.int8)
            scale[start:end] = part
        return cls(q, scale, kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [T, in] -> [T, out] in x's dtype."""
        if self.columns is not None:
            return self.columns(x.float()).to(x.dtype)
        return self.kernel.q8(x.float(), self.q, self.scale).to(x.dtype)

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows ``ids`` of the weights, float32 (the embedding lookup of a tied LM head)."""
        q = self.q.index_select(0, ids).float()
        scale = self.scale.index_select(0, ids)
        return (q.view(len(ids), -1, GROUP) * scale[..., None]).view(len(ids), -1)


_EXACT_ROWS = 1024
# Steps of up to this many rows run on the 4-bit copy: measured on a 2-core AVX2 CPU, the C
# kernel beats float32 GEMM at 16 rows for the model's widest projections and loses by 64.
DUAL_MAX_ROWS = 16
# The LM head over 8-bit groups with the wide layout (AVX-512 VNNI) runs on them up to a full
# batch at the default max_num_seqs: it only ever sees one row per sampled sequence, and the wide
# kernel beats float32 GEMM there at every width (49152x576: 8.9 against 19.8 ms at 64 rows,
# 43 against 66 at 256). float32's decode projections take the same kernel at these widths.
WIDE_DUAL_MAX_ROWS = 64
_NATIVE: list[GroupMatmul | None] = []


def group_kernel() -> GroupMatmul | None:
    """The C group matmuls (4-bit and 8-bit), built once per process (None where they cannot
    run)."""
    if not _NATIVE:
        from backends.engine.weights.native.group_matmul import GroupMatmul

        _NATIVE.append(GroupMatmul.available())
    return _NATIVE[0]


def make_linear(parts: list[Weight], biases: list[torch.Tensor] | None, weights: str) -> nn.Module:
    """One projection over the row-wise concatenation of ``parts``, stored as ``weights`` says.

    int4 keeps 4-bit file blocks as they are and requantizes anything else in groups of 32 (a
    width that is not a multiple of 32 falls back to int8). int4-decode over 4-bit file blocks,
    where the C kernel runs, keeps them beside their float32 copy for narrow steps
    (:class:`DualLinear`); float32 is float32 GEMM at every width.
    """
    bias = torch.cat([b.float() for b in biases]) if biases else None
    blocks = all(isinstance(p, GroupQuantized) for p in parts)
    if weights == "int4" and blocks:
        return Int4Linear(GroupQuantized.cat(parts), bias)  # type: ignore[arg-type]
    if weights == INT4_DECODE and blocks and group_kernel() is not None:
        narrow = Int4Linear(GroupQuantized.cat(parts), bias)  # type: ignore[arg-type]
        return DualLinear(None, narrow, DUAL_MAX_ROWS)
    dense = torch.cat([p.dequantize() if isinstance(p, GroupQuantized) else p for p in parts])
    if weights == "int4" and dense.shape[1] % GROUP == 0:
        return Int4Linear(Int4Linear.quantize(dense), bias)
    if weights in QUANTIZED:
        return Int8Linear.quantize(dense, bias)
    if weights == "bfloat16":
        kernel_linear = Bf16Linear.of(dense.to(torch.bfloat16), bias)
        if kernel_linear is not None:
            return kernel_linear
    dtype = getattr(torch, float_weights(weights))
    return FloatLinear(dense.to(dtype), None if bias is None else bias.to(dtype))


class Embedding(nn.Module):
    """Token embeddings; a quantized table is the int8 LM head's rows, shared when tied."""

    def __init__(
        self, table: torch.Tensor | Int8Linear | Int8GroupLinear | Bf16Linear, dtype: torch.dtype
    ) -> None:
        super().__init__()
        # A head whose layout is not a plain table (int8, or bfloat16's blocks) gives its rows.
        tables = Int8Linear | Int8GroupLinear | Bf16Linear
        self.quantized = table if isinstance(table, tables) else None
        # A tied table is the head's own Parameter: shared, not copied (nor counted twice).
        self.weight: torch.Tensor | None = None
        if isinstance(table, torch.Tensor):
            shared = isinstance(table, nn.Parameter)
            self.weight = table if shared else nn.Parameter(table, requires_grad=False)
        self.dtype = dtype

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Embeddings [T, hidden] in the model's activation dtype."""
        if self.quantized is not None:
            return self.quantized.rows(ids).to(self.dtype)
        return F.embedding(ids, dense(self.weight)).to(self.dtype)  # type: ignore[arg-type]


def head_and_embedding(
    embed: Weight, head: Weight | None, weights: str, dtype: torch.dtype
) -> tuple[nn.Module, Embedding]:
    """The LM head and the embedding table; one shared tensor when ``head`` is None (tied).

    The head is int8 under both quantized choices: it is the layer whose error reaches the
    logits undamped, and int8 is also the faster kernel at its shape (49152x576). Where the C
    kernel runs and the head is a GGUF Q8_0 tensor (the bundled file's), it keeps the file's own
    8-bit groups, which lose nothing (int4-decode: for its narrow steps; int8/int4: for every
    step). float32's head is float32 GEMM.
    """
    head_weights = "int8" if weights in QUANTIZED else float_weights(weights)
    embed_dense = embed.dequantize() if isinstance(embed, GroupQuantized) else embed
    head_dense = embed_dense if head is None else head
    kernel = group_kernel() if weights in (INT4_DECODE, *QUANTIZED) else None
    exact = None
    if kernel is not None and isinstance(head_dense, torch.Tensor):
        exact = Int8GroupLinear.exactly(head_dense, kernel)
    lm_head: nn.Module
    if weights in QUANTIZED and exact is not None:
        lm_head = exact
    else:
        lm_head = make_linear([head_dense], None, head_weights)
    if exact is not None and isinstance(lm_head, FloatLinear):
        narrow_rows = DUAL_MAX_ROWS if exact.columns is None else WIDE_DUAL_MAX_ROWS
        lm_head = DualLinear(lm_head, exact, narrow_rows)
    if head is None:
        if isinstance(lm_head, Int8Linear | Int8GroupLinear | Bf16Linear):
            return lm_head, Embedding(lm_head, dtype)
        if isinstance(lm_head, FloatLinear | DualLinear):
            return lm_head, Embedding(lm_head.weight, dtype)
    if weights in QUANTIZED:
        return lm_head, Embedding(Int8Linear.quantize(embed_dense), dtype)
    return lm_head, Embedding(embed_dense.to(getattr(torch, float_weights(weights))), dtype)
