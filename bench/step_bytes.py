"""Bytes one decode step reads, and FLOPs one batched step does, from a loaded model's tensors.

For the engine: each projection of every layer as a step of ``rows`` rows runs it (the wide
4-bit layout where it is built, a DualLinear's narrow copy up to its max_rows, ...), the LM head
likewise, one embedding row per row, the norms, and the K and V of every layer for each token
of context (the cache's own dtype). For llama.cpp: every tensor of the GGUF file as stored
(its token table in full where the head is tied to it, else one row of it), and an f16 cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(slots=True)
class StepBytes:
    """What a decode step of one sequence reads, in bytes."""

    projections: int
    head: int
    embedding_row: int
    other: int  # norms, rotary rows
    kv_per_token: int  # K and V of every layer for one token of context

    @property
    def weights(self) -> int:
        return self.projections + self.head + self.embedding_row + self.other

    def at(self, context: int) -> int:
        """Bytes of a step whose attention reads ``context`` tokens of cache."""
        return self.weights + self.kv_per_token * context


def _size(*tensors: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def module_read_bytes(module: Any, rows: int = 1) -> int:
    """Bytes of weights a step of ``rows`` rows reads through ``module``."""
    from backends.engine.weights.bf16_linear import Bf16Linear
    from backends.engine.weights.quant import (
        DualLinear,
        FloatLinear,
        Int4Linear,
        Int8GroupLinear,
        Int8Linear,
    )

    if isinstance(module, DualLinear):
        if rows <= module.max_rows:
            return module_read_bytes(module.narrow, rows)
        if module.wide is not None:
            return _size(module.wide.weight, module.wide.bias)
        out, groups = module.narrow.scale.shape  # the float32 copy, once built
        return out * groups * 32 * 4
    if isinstance(module, Int4Linear):
        extra = _size(module.bias, module.down, module.up)
        if module.columns is not None:
            columns = module.columns
            return extra + _size(columns.w, columns.scale, columns.low)
        if module.kernel is not None:
            return extra + _size(module.packed, module.scale, module.low)
        return extra + _size(module.packed, module.scale_zero)
    if isinstance(module, Int8GroupLinear):
        if module.columns is not None:
            return _size(module.columns.w, module.columns.scale)
        return _size(module.q, module.scale)
    if isinstance(module, Int8Linear):
        return _size(module.q, module.kernel_scales, module.bias)
    if isinstance(module, Bf16Linear):
        return _size(module.packed, module.bias)
    if isinstance(module, FloatLinear):
        return _size(module.weight, module.bias)
    # Anything else: all it holds, an upper bound.
    return _size(*module.parameters(), *module.buffers())


def _embedding_row(embed: Any, hidden: int) -> int:
    table = embed.quantized if embed.quantized is not None else embed.weight
    if hasattr(table, "q"):  # int8 rows and their scales
        scales = getattr(table, "scales", None)
        scales = table.scale if scales is None else scales
        return _size(table.q) // table.q.shape[0] + _size(scales) // scales.shape[0]
    if hasattr(table, "packed"):  # bfloat16 blocks
        return hidden * 2
    return _size(table) // table.shape[0]


def engine_step_bytes(runner: Any, rows: int = 1) -> StepBytes:
    """What one decode step of ``runner``'s model reads per sequence (weights for ``rows``)."""
    model = runner.model
    projections, norms = 0, _size(model.norm)
    for layer in model.layers:
        for module in (layer.qkv, layer.o_proj, layer.gate_up, layer.down):
            projections += module_read_bytes(module, rows)
        norms += _size(layer.input_norm, layer.post_norm)
    config = model.config
    rotary_row = config.head_dim * 4 * 2  # a position's cos and sin
    kv = sum(_size(k[0, 0], v[0, 0]) for k, v in runner.kv_caches)  # one slot of every layer
    return StepBytes(
        projections,
        module_read_bytes(model.lm_head, rows),
        _embedding_row(model.embed, config.hidden_size),
        norms + rotary_row,
        kv,
    )


def gguf_step_bytes(path: Path) -> StepBytes:
    """What llama.cpp reads per decode step of the GGUF file at ``path`` (f16 K and V)."""
    from backends.engine.config import read_config
    from backends.gguf.reader import read_gguf

    with read_gguf(path, arrays=False) as reader:
        tensors = {t.name: t.n_bytes for t in reader.tensors}
        shapes = {t.name: t.shape for t in reader.tensors}  # row-major: one row per token
    embed = tensors.pop("token_embd.weight")
    tied = "output.weight" not in tensors
    head = embed if tied else tensors.pop("output.weight")
    row = embed // shapes["token_embd.weight"][0]
    norms = sum(size for name, size in tensors.items() if name.endswith("norm.weight"))
    projections = sum(tensors.values()) - norms
    config = read_config(path)
    kv = 2 * config.num_layers * config.num_kv_heads * config.head_dim * 2
    return StepBytes(projections, head, row, norms, kv)


def step_flops(config: Any, rows: int, context: int) -> int:
    """FLOPs of one step of ``rows`` decode rows, each attending to ``context`` tokens."""
    hidden, dim = config.hidden_size, config.head_dim
    q, kv = config.num_heads * dim, config.num_kv_heads * dim
    per_layer = hidden * (q + 2 * kv) + q * hidden + 3 * hidden * config.intermediate_size
    matmuls = 2 * rows * (config.num_layers * per_layer + config.vocab_size * hidden)
    attention = 2 * 2 * rows * config.num_layers * config.num_heads * dim * context
    return matmuls + attention


def projection_shapes(config: Any) -> list[tuple[str, int, int, int]]:
    """(name, out, in, count per step) of the engine's matmuls: fused q|k|v, o, gate|up, down,
    head."""
    hidden, dim = config.hidden_size, config.head_dim
    q, kv = config.num_heads * dim, config.num_kv_heads * dim
    layers = config.num_layers
    return [
        ("qkv", q + 2 * kv, hidden, layers),
        ("o", hidden, q, layers),
        ("gate_up", 2 * config.intermediate_size, hidden, layers),
        ("down", hidden, config.intermediate_size, layers),
        ("head", config.vocab_size, hidden, 1),
    ]
