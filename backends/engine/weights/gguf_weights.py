"""A GGUF file's tensors as the engine's weights: renamed, dequantized to torch, Q/K unpermuted.

The file itself is read by :mod:`backends.gguf.reader`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from agent.errors import UserError
from backends.engine.config import ModelConfig
from backends.gguf.reader import GGUFFile, GGUFTensor

if TYPE_CHECKING:
    import torch

    from backends.engine.weights.quant import GroupQuantized, Weight
    from backends.gguf.lora import LoraAdapter

# GGUF tensor name suffix (inside blk.N.) -> engine parameter name (inside layers.N.)
_LAYER_NAMES = {
    "attn_norm.weight": "input_norm.weight",
    "ffn_norm.weight": "post_attention_norm.weight",
    "attn_q.weight": "q_proj.weight",
    "attn_k.weight": "k_proj.weight",
    "attn_v.weight": "v_proj.weight",
    "attn_q.bias": "q_proj.bias",
    "attn_k.bias": "k_proj.bias",
    "attn_v.bias": "v_proj.bias",
    "attn_output.weight": "o_proj.weight",
    "attn_q_norm.weight": "q_norm.weight",
    "attn_k_norm.weight": "k_norm.weight",
    "ffn_gate.weight": "gate_proj.weight",
    "ffn_up.weight": "up_proj.weight",
    "ffn_down.weight": "down_proj.weight",
}
_GLOBAL_NAMES = {
    "token_embd.weight": "embed_tokens.weight",
    "output_norm.weight": "norm.weight",
    "output.weight": "lm_head.weight",
    "rope_freqs.weight": "rope_freqs",
}


def engine_name(gguf_name: str) -> str | None:
    """The engine's parameter name for a GGUF tensor name; None for tensors the engine ignores."""
    if gguf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[gguf_name]
    if gguf_name.startswith("blk."):
        _, index, rest = gguf_name.split(".", 2)
        if rest in _LAYER_NAMES:
            return f"layers.{index}.{_LAYER_NAMES[rest]}"
    return None


def tensor_bytes(reader: GGUFFile, tensor: GGUFTensor) -> Any:
    """The tensor's raw bytes as a uint8 numpy view, one row of blocks per tensor row."""
    rows = math.prod(tensor.shape[:-1]) if len(tensor.shape) > 1 else 1
    raw = reader.tensor_bytes(tensor)
    return raw.reshape(rows, raw.size // rows)


def dequantize_tensor(reader: GGUFFile, tensor: GGUFTensor) -> torch.Tensor:
    """One GGUF tensor as a float32 torch tensor in row-major shape."""
    import gguf
    import numpy as np
    import torch

    raw = np.array(tensor_bytes(reader, tensor))  # a private, writable copy of the mapped bytes
    kind = gguf.GGMLQuantizationType(tensor.ggml_type)
    fast = _TORCH_DEQUANT.get(kind.name)
    if fast is not None:
        return fast(torch.from_numpy(raw)).reshape(tensor.shape)
    if kind == gguf.GGMLQuantizationType.F32:
        return torch.from_numpy(raw.view(np.float32)).reshape(tensor.shape)
    if kind == gguf.GGMLQuantizationType.F16:
        return torch.from_numpy(raw.view(np.float16)).float().reshape(tensor.shape)
    if kind == gguf.GGMLQuantizationType.BF16:
        # bfloat16 is the top half of a float32: widen in torch rather than numpy (faster).
        return (
            torch.from_numpy(raw.view(np.int16))
            .to(torch.int32)
            .bitwise_left_shift(16)
            .view(torch.float32)
            .reshape(tensor.shape)
        )
    try:
        values = gguf.quants.dequantize(raw, kind)
    except NotImplementedError as exc:
        raise UserError(f"GGUF tensor {tensor.name} has unsupported type {kind.name}") from exc
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).reshape(tensor.shape)


def _halves(blocks: torch.Tensor, start: int, count: int) -> torch.Tensor:
    """``count`` float16 values at byte ``start`` of every block, as float32 [blocks, count]."""
    import torch

    return blocks[:, start : start + 2 * count].contiguous().view(torch.float16).float()


def _nibbles(qs: torch.Tensor) -> torch.Tensor:
    """ggml 4-bit packing: low nibbles are elements 0..15 of a block, high nibbles 16..31."""
    import torch

    return torch.cat((qs & 0x0F, qs >> 4), dim=1).float()


def _dequant_q8_0(raw: torch.Tensor) -> torch.Tensor:
    blocks = raw.reshape(-1, 34)
    return _halves(blocks, 0, 1) * blocks[:, 2:].contiguous().view(torch_int8()).float()


def _dequant_q4_0(raw: torch.Tensor) -> torch.Tensor:
    blocks = raw.reshape(-1, 18)
    return _halves(blocks, 0, 1) * (_nibbles(blocks[:, 2:]) - 8.0)


def _dequant_q4_1(raw: torch.Tensor) -> torch.Tensor:
    blocks = raw.reshape(-1, 20)
    scale_min = _halves(blocks, 0, 2)
    return scale_min[:, :1] * _nibbles(blocks[:, 4:]) + scale_min[:, 1:]


def group_quantized(reader: GGUFFile, tensor: GGUFTensor) -> GroupQuantized | None:
    """A Q4_0/Q4_1 tensor's blocks as 4-bit values with a scale and a low per 32, unrounded."""
    import gguf
    import numpy as np
    import torch

    from backends.engine.weights.quant import GroupQuantized

    kind = gguf.GGMLQuantizationType(tensor.ggml_type).name
    if kind not in ("Q4_0", "Q4_1") or len(tensor.shape) != 2:
        return None
    rows, cols = tensor.shape
    raw = torch.from_numpy(np.array(tensor_bytes(reader, tensor)))
    blocks = raw.reshape(-1, 20 if kind == "Q4_1" else 18)
    scale = _halves(blocks, 0, 1)
    # Q4_0 is symmetric around 8: w = d * (q - 8), a low of -8d.
    low = _halves(blocks, 2, 1) if kind == "Q4_1" else -8 * scale
    qs = blocks[:, 4:] if kind == "Q4_1" else blocks[:, 2:]
    q = torch.cat((qs & 0x0F, qs >> 4), dim=1)
    groups = cols // 32
    return GroupQuantized(
        q.reshape(rows, cols), scale.reshape(rows, groups), low.reshape(rows, groups)
    )


def torch_int8() -> Any:
    """torch.int8, imported lazily."""
    import torch

    return torch.int8


# The simple block formats are dequantized in torch (several times faster than numpy);
# the rest go through gguf.quants.
_TORCH_DEQUANT: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "Q8_0": _dequant_q8_0,
    "Q4_0": _dequant_q4_0,
    "Q4_1": _dequant_q4_1,
}


def reverse_qk_permute(weight: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation (interleaved rotary pairs -> rotate-half halves)."""
    rows = weight.shape[0]
    rest = weight.shape[1:]
    return (
        weight.reshape(num_heads, rows // num_heads // 2, 2, *rest)
        .transpose(1, 2)
        .reshape(weight.shape)
    )


def iter_gguf_weights(
    reader: GGUFFile,
    config: ModelConfig,
    on_tensor: Callable[[int], None] | None = None,
    adapter: LoraAdapter | None = None,
    keep_4bit: bool = False,
) -> Iterator[tuple[str, Weight]]:
    """Yield (engine name, float32 tensor) for every tensor the engine uses; reports bytes read.

    A LoRA ``adapter`` is merged into the weights it adapts, in the file's own layout (as
    llama.cpp applies it), before the Q/K rows are put in the engine's order. ``keep_4bit``
    yields Q4_0/Q4_1 projections as :class:`GroupQuantized` blocks instead of floats, with an
    adapter's factors kept beside them.
    """
    import torch

    # llama.cpp's converter permutes Q/K rows only for the llama architecture (Mistral included).
    unpermute = config.architecture in ("llama", "mistral")
    for tensor in reader.tensors:
        name = engine_name(tensor.name)
        if name is not None:
            factors = adapter.factors(tensor.name) if adapter is not None else None
            blocks = group_quantized(reader, tensor) if keep_4bit else None
            value: Weight
            if blocks is not None and name.endswith("_proj.weight"):
                if factors is not None:
                    down, up = factors
                    blocks.down = torch.from_numpy(down)
                    blocks.up = torch.from_numpy(up)
                value = blocks
            else:
                value = dequantize_tensor(reader, tensor)
                delta = adapter.delta(tensor.name) if adapter is not None else None
                if delta is not None:
                    value = value + torch.from_numpy(delta).reshape(value.shape)
            heads = None
            if unpermute and name.endswith(("q_proj.weight", "q_proj.bias")):
                heads = config.num_heads
            elif unpermute and name.endswith(("k_proj.weight", "k_proj.bias")):
                heads = config.num_kv_heads
            if heads is not None:
                value = _unpermute(value, heads)
            yield name, value
        if on_tensor is not None:
            on_tensor(tensor.n_bytes)


def _unpermute(value: Weight, heads: int) -> Weight:
    from backends.engine.weights.quant import GroupQuantized

    if isinstance(value, GroupQuantized):
        return value.map_rows(lambda part: reverse_qk_permute(part, heads))
    return reverse_qk_permute(value, heads)


def gguf_total_bytes(reader: GGUFFile) -> int:
    """Bytes of tensor data in the file, for a progress bar."""
    return sum(t.n_bytes for t in reader.tensors)
