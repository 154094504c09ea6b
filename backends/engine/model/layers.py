"""Building blocks of a Llama-family decoder: RMSNorm, rotary embeddings, attention and MLP."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from agent.errors import UserError
from backends.engine.config import ModelConfig
from backends.engine.weights.quant import DualLinear, Weight, dense, make_linear

if TYPE_CHECKING:
    from backends.engine.weights.native.elementwise import Elementwise


class StepAttention(Protocol):
    """Stores one layer's new K/V in the paged cache and attends over it, for one engine step."""

    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
    ) -> torch.Tensor: ...  # q [T, H, D], k/v [T, KV, D] -> [T, H, D]


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm in float32 (as transformers does), returned in the input dtype."""
    if x.dtype == torch.float32:
        return F.rms_norm(x, weight.shape, weight, eps)
    return F.rms_norm(x.float(), weight.shape, weight.float(), eps).to(x.dtype)


def rope_inv_freq(config: ModelConfig, freq_factors: torch.Tensor | None = None) -> torch.Tensor:
    """Rotary inverse frequencies, with llama3/linear scaling or GGUF per-frequency factors."""
    dim = config.head_dim
    inv_freq = 1.0 / (
        config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)
    )
    scaling = config.rope_scaling or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if freq_factors is not None:
        # llama.cpp stores llama3-style scaling as precomputed divisors (rope_freqs.weight).
        return inv_freq / freq_factors.float()
    if kind == "default":
        return inv_freq
    factor = float(scaling.get("factor", 1.0))
    if kind == "linear":
        return inv_freq / factor
    if kind == "llama3":
        low = float(scaling.get("low_freq_factor", 1.0))
        high = float(scaling.get("high_freq_factor", 4.0))
        old_context = float(scaling.get("original_max_position_embeddings", 8192))
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > old_context / low, inv_freq / factor, inv_freq)
        smooth = (old_context / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= old_context / high) & (wavelen <= old_context / low)
        return torch.where(medium, smoothed, scaled)
    raise UserError(f"rope scaling type {kind!r} is not supported by the bundled engine")


class RotaryEmbedding(nn.Module):
    """Rotate-half rotary embeddings with a precomputed cos/sin table over all positions."""

    def __init__(self, config: ModelConfig, freq_factors: torch.Tensor | None = None) -> None:
        super().__init__()
        inv_freq = rope_inv_freq(config, freq_factors)
        positions = torch.arange(config.max_position, dtype=torch.float32)
        freqs = torch.outer(positions, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        half = config.head_dim // 2
        # rotate_half(x) * sin == roll(x, half) * [-sin, +sin]: one roll instead of split+neg+cat.
        sign = torch.cat((-torch.ones(half), torch.ones(half)))
        self.cos: torch.Tensor
        self.sin_signed: torch.Tensor
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin_signed", emb.sin() * sign, persistent=False)
        self.half_dim = half

    def tables(
        self, positions: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and signed sin for the step's positions, shaped [T, 1, D] to broadcast over heads."""
        cos = self.cos.index_select(0, positions).unsqueeze(1).to(dtype)
        sin = self.sin_signed.index_select(0, positions).unsqueeze(1).to(dtype)
        return cos, sin

    def rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Rotate x [T, heads, D] by the step's positions."""
        return torch.addcmul(x * cos, torch.roll(x, self.half_dim, dims=-1), sin)


class DecoderLayer(nn.Module):
    """One pre-norm transformer block: GQA attention over the paged cache, then a SwiGLU MLP."""

    def __init__(
        self, config: ModelConfig, weights: dict[str, Weight], storage: str = "float32"
    ) -> None:
        super().__init__()
        self.eps = config.rms_norm_eps
        self.num_heads, self.num_kv_heads, self.head_dim = (
            config.num_heads,
            config.num_kv_heads,
            config.head_dim,
        )
        self.q_size = config.num_heads * config.head_dim
        self.kv_size = config.num_kv_heads * config.head_dim
        # Fused projections: one GEMM for q|k|v and one for gate|up keep the op count per layer low.
        biases = [weights.pop(f"{n}_proj.bias", None) for n in "qkv"]
        present = [b for b in biases if isinstance(b, torch.Tensor)]
        self.qkv = make_linear(
            [weights.pop(f"{n}_proj.weight") for n in "qkv"],
            present if len(present) == 3 else None,
            storage,
        )
        self.o_proj = make_linear([weights.pop("o_proj.weight")], None, storage)
        self.gate_up = make_linear(
            [weights.pop("gate_proj.weight"), weights.pop("up_proj.weight")], None, storage
        )
        self.down = make_linear([weights.pop("down_proj.weight")], None, storage)
        self.input_norm = nn.Parameter(dense(weights.pop("input_norm.weight")), requires_grad=False)
        self.post_norm = nn.Parameter(
            dense(weights.pop("post_attention_norm.weight")), requires_grad=False
        )
        self.q_norm: nn.Parameter | None = None
        self.k_norm: nn.Parameter | None = None
        if config.qk_norm:
            self.q_norm = nn.Parameter(dense(weights.pop("q_norm.weight")), requires_grad=False)
            self.k_norm = nn.Parameter(dense(weights.pop("k_norm.weight")), requires_grad=False)
        self.intermediate = config.intermediate_size

    def forward(
        self,
        x: torch.Tensor,
        rope: RotaryEmbedding,
        cos_sin: tuple[torch.Tensor, torch.Tensor],
        attention: StepAttention,
        kv_cache: tuple[torch.Tensor, torch.Tensor],
        keep: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x [T, hidden] -> x [T, hidden] for all tokens of the step at once; with ``keep`` (row
        indices), every token's keys and values are stored and x [len(keep), hidden] is
        returned for those rows alone."""
        tokens = x.shape[0]
        ops = _elementwise(x)
        if ops is not None:
            qkv = self.qkv(ops.rms_norm(x, self.input_norm, self.eps))
        else:
            qkv = self.qkv(rms_norm(x, self.input_norm, self.eps))
        qk = qkv[:, : self.q_size + self.kv_size].view(
            tokens, self.num_heads + self.num_kv_heads, self.head_dim
        )
        v = qkv[:, self.q_size + self.kv_size :].view(tokens, self.num_kv_heads, self.head_dim)
        ops = ops if ops is not None and qkv.is_contiguous() else None
        if self.q_norm is not None and self.k_norm is not None:
            q = rms_norm(qk[:, : self.num_heads], self.q_norm, self.eps)
            k = rms_norm(qk[:, self.num_heads :], self.k_norm, self.eps)
            qk = torch.cat((q, k), dim=1)
            qk = rope.rotate(qk, *cos_sin)
        elif ops is not None:  # in place, one pass: q and k stay views of qkv
            ops.rotate(qkv, self.num_heads + self.num_kv_heads, self.head_dim, *cos_sin)
        else:
            qk = rope.rotate(qk, *cos_sin)  # q and k rotated together: one set of ops for both
        out = attention(qk[:, : self.num_heads], qk[:, self.num_heads :], v, *kv_cache)
        out = out.reshape(tokens, self.q_size)
        if keep is not None:
            out, x = out[keep], x[keep]
            if not len(keep):  # nobody reads this step's last hidden states
                return x
        projected = _project(self.o_proj, out, tokens)
        if ops is not None and projected.is_contiguous():
            # the residual add into the projection's own fresh output, and the norm, in one pass
            normed = ops.add_rms_norm(projected, x, self.post_norm, self.eps)
            x = projected
        else:
            x = x + projected
            normed = rms_norm(x, self.post_norm, self.eps)
        gate_up = _project(self.gate_up, normed, tokens)
        if ops is not None and gate_up.is_contiguous():
            return x + _project(self.down, ops.silu_times(gate_up, self.intermediate), tokens)
        gate, up = gate_up.split(self.intermediate, dim=-1)
        return x + _project(self.down, F.silu(gate) * up, tokens)


def _project(module: nn.Module, x: torch.Tensor, step_rows: int) -> torch.Tensor:
    """``module(x)`` for rows of a step ``step_rows`` wide: a DualLinear picks its path by the
    step's width, so the last layer's kept rows of a prompt chunk keep float32 GEMM."""
    if isinstance(module, DualLinear):
        return module(x, step_rows)
    return module(x)


_ELEMENTWISE: list[Elementwise | None] = []


def _elementwise(x: torch.Tensor) -> Elementwise | None:
    """The C elementwise kernels for this step's CPU float32 activations, or None (PyTorch's
    operators: on CUDA, in bfloat16, or where they cannot be built)."""
    if x.device.type != "cpu" or x.dtype != torch.float32 or not x.is_contiguous():
        return None
    if not _ELEMENTWISE:
        from backends.engine.weights.native.elementwise import Elementwise

        _ELEMENTWISE.append(Elementwise.available())
    return _ELEMENTWISE[0]


def parameter_bytes(module: Any) -> int:
    """Bytes held by a module's parameters and buffers."""
    tensors = [*module.parameters(), *module.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)
