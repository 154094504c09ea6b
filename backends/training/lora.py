"""peft's LoRA on a transformers Llama model, and its weights in llama.cpp's GGUF layout."""

from __future__ import annotations

import re
from typing import Any

from backends.gguf.lora import LoraAdapter

# Hugging Face module name -> GGUF base tensor name (inside blk.N.)
GGUF_NAMES = {
    "q_proj": "attn_q.weight",
    "k_proj": "attn_k.weight",
    "v_proj": "attn_v.weight",
    "o_proj": "attn_output.weight",
    "gate_proj": "ffn_gate.weight",
    "up_proj": "ffn_up.weight",
    "down_proj": "ffn_down.weight",
}
DEFAULT_TARGETS = tuple(GGUF_NAMES)
_KEY = re.compile(r"layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])(?:\.\w+)?\.weight$")


def permute_qk(rows: Any, num_heads: int) -> Any:
    """llama.cpp's Q/K row order from Hugging Face's (rotate-half halves -> interleaved pairs)."""
    shape = rows.shape
    return (
        rows.reshape(num_heads, 2, shape[0] // num_heads // 2, *shape[1:])
        .swapaxes(1, 2)
        .reshape(shape)
    )


def to_gguf_adapter(state: dict[str, Any], alpha: float, config: Any) -> LoraAdapter:
    """peft's LoRA state dict as an adapter in llama.cpp's layout (B's Q/K rows permuted)."""
    halves: dict[str, dict[str, Any]] = {}
    for key, tensor in state.items():
        found = _KEY.search(key)
        if found is None:
            continue
        layer, module, part = found.groups()
        if module not in GGUF_NAMES:
            continue
        name = f"blk.{layer}.{GGUF_NAMES[module]}"
        halves.setdefault(name, {})[part] = tensor.detach().float().cpu().numpy()
    pairs: dict[str, tuple[Any, Any]] = {}
    for name, pair in halves.items():
        a, b = pair["A"], pair["B"]
        if name.endswith("attn_q.weight"):
            b = permute_qk(b, config.num_attention_heads)
        elif name.endswith("attn_k.weight"):
            b = permute_qk(b, config.num_key_value_heads)
        pairs[name] = (a, b)
    return LoraAdapter(alpha, pairs, "llama")


def unpermute_qk(rows: Any, num_heads: int) -> Any:
    """Hugging Face's Q/K row order from llama.cpp's (the inverse of :func:`permute_qk`)."""
    shape = rows.shape
    return (
        rows.reshape(num_heads, shape[0] // num_heads // 2, 2, *shape[1:])
        .swapaxes(1, 2)
        .reshape(shape)
    )


def from_gguf_adapter(adapter: LoraAdapter, keys: list[str], config: Any) -> dict[str, Any]:
    """An adapter in llama.cpp's layout as numpy arrays under peft's state-dict ``keys``.

    The inverse of :func:`to_gguf_adapter`, so a run can start from an earlier run's adapter;
    a key with no tensor in the adapter is left out (peft keeps its fresh initial value).
    """
    state: dict[str, Any] = {}
    for key in keys:
        found = _KEY.search(key)
        if found is None or found.group(2) not in GGUF_NAMES:
            continue
        layer, module, part = found.groups()
        name = f"blk.{layer}.{GGUF_NAMES[module]}"
        pair = adapter.pairs.get(name)
        if pair is None:
            continue
        a, b = pair
        if part == "A":
            state[key] = a
            continue
        if module == "q_proj":
            b = unpermute_qk(b, config.num_attention_heads)
        elif module == "k_proj":
            b = unpermute_qk(b, config.num_key_value_heads)
        state[key] = b
    return state
