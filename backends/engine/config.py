"""The shape of a Llama-family decoder, from GGUF metadata or a Hugging Face config.json."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.errors import ConfigError, UserError
from backends.gguf.reader import GGUFFile, read_gguf

# Architectures the engine runs: all are Llama-style decoders (RMSNorm, RoPE, GQA, SwiGLU).
SUPPORTED_ARCHITECTURES = ("llama", "mistral", "qwen2", "qwen3")
GGUF_INSTALL_HINT = "pip install 'clawloop[engine]'"
# Drafted tokens per step when the settings leave it unset, on the CPU: agent turns decode about
# 1.5 times as fast with 3 and greedy output is unchanged (bench/speculation.py, docs/engine.md).
# Off on a GPU, where the check of a draft has not been measured.
SPECULATE_ON_CPU = 3


@dataclass(slots=True)
class ModelConfig:
    """Everything the engine needs to know about a model's shape, no weights."""

    architecture: str
    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    rope_theta: float
    rms_norm_eps: float
    max_position: int
    tie_embeddings: bool
    qk_norm: bool = False
    attention_bias: bool = False
    # Hugging Face style rope_scaling dict ({"rope_type": "llama3", "factor": ..., ...}) or None.
    rope_scaling: dict[str, Any] | None = field(default=None)

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """Bytes of K and V cache one token takes across all layers."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * dtype_bytes


def read_config(path: Path) -> ModelConfig:
    """Read a model's config from a .gguf file or a Hugging Face folder without loading weights."""
    path = Path(path).expanduser()
    if path.is_dir():
        return config_from_hf(json.loads(_config_json(path).read_text()))
    if path.is_file():
        with read_gguf(path, arrays=False) as reader:
            return config_from_gguf(reader)
    raise UserError(f"model path {path} does not exist: pass a .gguf file or a Hugging Face folder")


def _config_json(folder: Path) -> Path:
    config = folder / "config.json"
    if not config.is_file():
        raise UserError(f"{folder} has no config.json: pass a .gguf file or a Hugging Face folder")
    return config


def _check_arch(arch: str, source: object) -> str:
    if arch not in SUPPORTED_ARCHITECTURES:
        raise UserError(
            f"{source}: architecture {arch!r} is not supported by the bundled engine "
            f"(supported: {', '.join(SUPPORTED_ARCHITECTURES)}); use the llama.cpp backend instead"
        )
    return arch


def config_from_hf(raw: dict[str, Any]) -> ModelConfig:
    """Build a ModelConfig from a parsed Hugging Face config.json."""
    arch = _check_arch(str(raw.get("model_type", "")), "config.json")
    try:
        hidden = int(raw["hidden_size"])
        heads = int(raw["num_attention_heads"])
        # transformers 5 moved rope settings into rope_parameters; older configs keep them on top.
        rope = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
        theta = raw.get("rope_theta", rope.get("rope_theta", 10000.0))
        scaling = (
            dict(rope) if rope.get("rope_type", rope.get("type", "default")) != "default" else None
        )
        return ModelConfig(
            architecture=arch,
            num_layers=int(raw["num_hidden_layers"]),
            hidden_size=hidden,
            intermediate_size=int(raw["intermediate_size"]),
            num_heads=heads,
            num_kv_heads=int(raw.get("num_key_value_heads") or heads),
            head_dim=int(raw.get("head_dim") or hidden // heads),
            vocab_size=int(raw["vocab_size"]),
            rope_theta=float(theta),
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            max_position=int(raw.get("max_position_embeddings", 4096)),
            tie_embeddings=bool(raw.get("tie_word_embeddings", False)),
            qk_norm=arch == "qwen3",
            attention_bias=bool(raw.get("attention_bias", arch == "qwen2")),
            rope_scaling=scaling,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"config.json is missing or has a bad value for {exc}") from exc


def config_from_gguf(reader: GGUFFile) -> ModelConfig:
    """Build a ModelConfig from a GGUF file's metadata and tensor names (its arrays may be
    skipped: only their lengths are used)."""
    arch = str(reader.get("general.architecture", ""))
    _check_arch(arch, "GGUF file")

    def meta(key: str, default: Any = None) -> Any:
        value = reader.get(f"{arch}.{key}", default)
        if value is None:
            raise UserError(f"GGUF file lacks the metadata key {arch}.{key}")
        return value

    names = {t.name for t in reader.tensors}
    hidden = int(meta("embedding_length"))
    heads = int(meta("attention.head_count"))
    vocab = reader.get(f"{arch}.vocab_size")
    if vocab is None:
        vocab = reader.array_lengths.get("tokenizer.ggml.tokens")
    if vocab is None:
        raise UserError("GGUF file has neither a vocab size nor a token list")
    scaling = None
    scaling_type = reader.get(f"{arch}.rope.scaling.type")
    if scaling_type not in (None, "none"):
        scaling = {
            "rope_type": scaling_type,
            "factor": float(reader.get(f"{arch}.rope.scaling.factor", 1.0)),
            "original_max_position_embeddings": int(
                reader.get(f"{arch}.rope.scaling.original_context_length", 0)
            ),
        }
    return ModelConfig(
        architecture=arch,
        num_layers=int(meta("block_count")),
        hidden_size=hidden,
        intermediate_size=int(meta("feed_forward_length")),
        num_heads=heads,
        num_kv_heads=int(meta("attention.head_count_kv", heads)),
        head_dim=int(meta("attention.key_length", hidden // heads)),
        vocab_size=int(vocab),
        rope_theta=float(meta("rope.freq_base", 10000.0)),
        rms_norm_eps=float(meta("attention.layer_norm_rms_epsilon", 1e-5)),
        max_position=int(meta("context_length", 4096)),
        tie_embeddings="output.weight" not in names,
        qk_norm="blk.0.attn_q_norm.weight" in names,
        attention_bias="blk.0.attn_q.bias" in names,
        rope_scaling=scaling,
    )


class EngineSettings(BaseModel):
    """The engine's knobs, as the ``[backends.engine]`` config table (and ``agent serve``) set them.

    Unset values keep the engine's defaults: float32 activations on CPU, with a 4-bit GGUF's own
    groups as the weights where the CPU has AVX-512 VNNI, int4-decode for other GGUF files where
    the C kernels run, float32 weights elsewhere, and
    bfloat16 on CUDA, a KV cache sized from free memory (float16 beside 4-bit weights on CPU),
    16-token blocks, prefix caching on, and on CPU a 1 GiB prefix cache on disk.
    """

    model_config = ConfigDict(extra="ignore")

    device: str | None = None
    dtype: str | None = None  # float32, bfloat16 or float16 (checked where torch is loaded)
    # Projection weights: float32, int4-decode (float32 prompts, decode on the file's 4-bit
    # groups), bfloat16, int8 or int4 (unset: see loader.file_weights).
    weights: Literal["float32", "int4-decode", "bfloat16", "int8", "int4"] | None = None
    # The KV cache: float32 or float16 (unset: float16 beside 4-bit and 8-bit weights on a CPU
    # whose attention kernel reads it, else the activations' dtype; model_runner.default_kv_dtype).
    kv_dtype: Literal["float32", "float16"] | None = None
    kv_cache_bytes: int | None = Field(default=None, gt=0)
    block_size: int = Field(default=16, ge=1, le=1024)
    max_num_seqs: int = Field(default=64, ge=1)
    max_num_batched_tokens: int = Field(default=2048, ge=1)
    enable_prefix_caching: bool = True
    # Cap on one sequence's prefill chunk per step, so a long prompt cannot stall decodes (0: off).
    long_prefill_token_threshold: int = Field(default=0, ge=0)
    max_model_len: int | None = Field(default=None, ge=2)
    # Append the tokens a tool-call grammar forces at once instead of decoding them one by one.
    jump_forward: bool = True
    # Prompt-lookup speculative decoding for every request of this backend: draft up to this
    # many tokens per step from the conversation itself (0: off; unset: SPECULATE_ON_CPU on the
    # CPU, off elsewhere; see docs/engine.md).
    num_speculative_tokens: int | None = Field(default=None, ge=0, le=16)
    # Keep the loaded model in the user's cache folder so later starts skip decoding the file.
    weight_cache: bool = True
    # Full prompt blocks kept on disk across processes (unset: on for CPU, off elsewhere).
    disk_cache: bool | None = None
    disk_cache_mib: int = Field(default=1024, ge=1)
    # Seconds the resident engine of `agent run` / `agent chat` stays loaded after its last
    # request (0: each run loads the engine in its own process).
    keep_alive: int = Field(default=300, ge=0)

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> EngineSettings:
        """Validate backend options; a bad value is a :class:`ConfigError` naming the key."""
        try:
            return cls.model_validate({k: v for k, v in options.items() if v is not None})
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(str(p) for p in err["loc"])
            raise ConfigError(f"invalid engine setting {key!r}: {err['msg']}") from None

    def speculation_on(self, device: str) -> int:
        """Tokens drafted per step for this backend's requests on ``device`` (0: none)."""
        if self.num_speculative_tokens is not None:
            return self.num_speculative_tokens
        return SPECULATE_ON_CPU if device == "cpu" else 0

    def disk_cache_on(self, device: str) -> bool:
        """Whether the disk prefix cache is in use on ``device``."""
        if not self.enable_prefix_caching:
            return False
        return self.disk_cache if self.disk_cache is not None else device == "cpu"
