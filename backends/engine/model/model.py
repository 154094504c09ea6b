"""A Llama-family decoder (Llama, SmolLM2, Mistral, Qwen2, Qwen3) over a paged KV cache."""

from __future__ import annotations

import torch
from torch import nn

from agent.errors import UserError
from backends.engine.config import ModelConfig
from backends.engine.model.layers import DecoderLayer, RotaryEmbedding, StepAttention, rms_norm
from backends.engine.weights.quant import Weight, dense, head_and_embedding


class CausalLM(nn.Module):
    """Embeddings, decoder layers, final norm and LM head; forward runs all of a step's tokens."""

    def __init__(
        self,
        config: ModelConfig,
        weights: dict[str, Weight],
        storage: str = "float32",
    ) -> None:
        """``storage`` is how projections keep their weights (float32, bfloat16, int8, int4);
        activations run in the norm weights' dtype."""
        super().__init__()
        self.config = config
        missing = _missing_weights(config, weights)
        if missing:
            raise UserError(
                f"the model file lacks weights the engine needs: {', '.join(missing[:5])}"
            )
        self.storage = storage
        self.norm = nn.Parameter(dense(weights.pop("norm.weight")), requires_grad=False)
        self.dtype = self.norm.dtype
        head = weights.pop("lm_head.weight", None)
        self.lm_head, self.embed = head_and_embedding(
            weights.pop("embed_tokens.weight"),
            None if config.tie_embeddings else head,
            storage,
            self.dtype,
        )
        freqs = weights.pop("rope_freqs", None)
        self.rotary = RotaryEmbedding(config, None if freqs is None else dense(freqs))
        layers = []
        for index in range(config.num_layers):
            prefix = f"layers.{index}."
            own = {
                name[len(prefix) :]: weights.pop(name)
                for name in list(weights)
                if name.startswith(prefix)
            }
            layers.append(DecoderLayer(config, own, storage))
        self.layers = nn.ModuleList(layers)

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        attention: StepAttention,
        kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
        keep: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Hidden states [T, hidden] (before the final norm) for input_ids/positions [T].

        With ``keep`` (row indices), only those rows' hidden states [len(keep), hidden]: the last
        layer stores every token's keys and values, then runs its output projection and MLP on
        the kept rows alone (as llama.cpp does). In a prompt chunk that is one row of hundreds,
        or none, where the chunk does not end its prompt."""
        x = self.embed(input_ids)
        cos_sin = self.rotary.tables(positions, x.dtype)
        last = len(self.layers) - 1
        for index, (layer, kv) in enumerate(zip(self.layers, kv_caches, strict=True)):
            x = layer(x, self.rotary, cos_sin, attention, kv, keep if index == last else None)
        return x

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 logits [n, vocab] for the given rows of hidden states."""
        normed = rms_norm(hidden, self.norm, self.config.rms_norm_eps)
        return self.lm_head(normed).float()


def _missing_weights(config: ModelConfig, weights: dict[str, Weight]) -> list[str]:
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
