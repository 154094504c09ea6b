"""A Llama-family decoder (Llama, SmolLM2, Mistral, Qwen2, Qwen3) over a paged KV cache."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from agent.errors import UserError
from backends.engine.config import ModelConfig
from backends.engine.layers import DecoderLayer, RotaryEmbedding, StepAttention, rms_norm


class CausalLM(nn.Module):
    """Embeddings, decoder layers, final norm and LM head; forward runs all of a step's tokens."""

    def __init__(self, config: ModelConfig, weights: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.config = config
        missing = _missing_weights(config, weights)
        if missing:
            raise UserError(
                f"the model file lacks weights the engine needs: {', '.join(missing[:5])}"
            )
        self.embed = nn.Parameter(weights.pop("embed_tokens.weight"), requires_grad=False)
        head = weights.pop("lm_head.weight", None)
        self.lm_head = (
            self.embed
            if config.tie_embeddings or head is None
            else nn.Parameter(head, requires_grad=False)
        )
        self.norm = nn.Parameter(weights.pop("norm.weight"), requires_grad=False)
        self.rotary = RotaryEmbedding(config, weights.pop("rope_freqs", None))
        layers = []
        for index in range(config.num_layers):
            prefix = f"layers.{index}."
            own = {
                name[len(prefix) :]: weights.pop(name)
                for name in list(weights)
                if name.startswith(prefix)
            }
            layers.append(DecoderLayer(config, own))
        self.layers = nn.ModuleList(layers)

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        attention: StepAttention,
        kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
    ) -> torch.Tensor:
        """Hidden states [T, hidden] (before the final norm) for input_ids/positions [T]."""
        x = F.embedding(input_ids, self.embed)
        cos_sin = self.rotary.tables(positions, x.dtype)
        for layer, kv in zip(self.layers, kv_caches, strict=True):
            x = layer(x, self.rotary, cos_sin, attention, kv)
        return x

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 logits [n, vocab] for the given rows of hidden states."""
        normed = rms_norm(hidden, self.norm, self.config.rms_norm_eps)
        return F.linear(normed, self.lm_head).float()


def _missing_weights(config: ModelConfig, weights: dict[str, torch.Tensor]) -> list[str]:
    needed = ["embed_tokens.weight", "norm.weight"]
    if not config.tie_embeddings:
        needed.append("lm_head.weight")
    per_layer = ["input_norm", "post_attention_norm", "q_proj", "k_proj", "v_proj", "o_proj"]
    per_layer += ["gate_proj", "up_proj", "down_proj"]
    if config.qk_norm:
        per_layer += ["q_norm", "k_norm"]
    for index in range(config.num_layers):
        needed += [f"layers.{index}.{name}.weight" for name in per_layer]
    return [name for name in needed if name not in weights]
