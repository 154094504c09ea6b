"""Read a Hugging Face model folder's *.safetensors weights under the engine's parameter names."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from agent.errors import UserError
from backends.engine.config import GGUF_INSTALL_HINT

if TYPE_CHECKING:
    import torch

_LAYER = re.compile(r"^model\.layers\.(\d+)\.(?:self_attn|mlp)?\.?(.+)$")
_LAYER_NAMES = {
    "input_layernorm.weight": "input_norm.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
}
_GLOBAL_NAMES = {
    "model.embed_tokens.weight": "embed_tokens.weight",
    "model.norm.weight": "norm.weight",
    "lm_head.weight": "lm_head.weight",
}
_KNOWN_LAYER_PARAMS = {
    "input_norm.weight",
    "post_attention_norm.weight",
    "q_proj.weight",
    "k_proj.weight",
    "v_proj.weight",
    "q_proj.bias",
    "k_proj.bias",
    "v_proj.bias",
    "o_proj.weight",
    "q_norm.weight",
    "k_norm.weight",
    "gate_proj.weight",
    "up_proj.weight",
    "down_proj.weight",
}


def engine_name(hf_name: str) -> str | None:
    """The engine's parameter name for a transformers parameter name; None if unused."""
    if hf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[hf_name]
    match = _LAYER.match(hf_name)
    if match is None:
        return None
    index, rest = match.groups()
    rest = _LAYER_NAMES.get(rest, rest)
    return f"layers.{index}.{rest}" if rest in _KNOWN_LAYER_PARAMS else None


def safetensors_files(folder: Path) -> list[Path]:
    """The folder's weight files, or a UserError when there are none."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise UserError(
            f"{folder} has no *.safetensors files (only safetensors weights are supported)"
        )
    return files


def hf_total_bytes(folder: Path) -> int:
    """Bytes of weight files, for a progress bar."""
    return sum(f.stat().st_size for f in safetensors_files(folder))


def iter_hf_weights(
    folder: Path, on_tensor: Callable[[int], None] | None = None
) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield (engine name, tensor in its stored dtype) for every weight the engine uses."""
    try:
        from safetensors import safe_open
    except ImportError as exc:
        raise UserError(
            f"reading safetensors needs the safetensors package: {GGUF_INSTALL_HINT}"
        ) from exc
    for file in safetensors_files(folder):
        with safe_open(str(file), framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118 - safe_open is not a dict
                name = engine_name(key)
                tensor = handle.get_tensor(key)
                if name is not None:
                    yield name, tensor
                if on_tensor is not None:
                    on_tensor(tensor.numel() * tensor.element_size())
