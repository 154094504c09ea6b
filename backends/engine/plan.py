"""How much KV cache fits: bytes per token, blocks and tokens after the weights, sequences.

Used by ``agent engine plan``; reads the model's shape and weight sizes from file headers, never
loading a weight.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agent.errors import UserError

DTYPE_BYTES = {"bf16": 2, "f16": 2, "f32": 4}
_DTYPE_ALIASES = {
    "bfloat16": "bf16",
    "float16": "f16",
    "fp16": "f16",
    "float32": "f32",
    "fp32": "f32",
}
_UNITS = {
    "": 1, "b": 1,
    "k": 1 << 10, "kib": 1 << 10, "kb": 10**3,
    "m": 1 << 20, "mib": 1 << 20, "mb": 10**6,
    "g": 1 << 30, "gib": 1 << 30, "gb": 10**9,
    "t": 1 << 40, "tib": 1 << 40, "tb": 10**12,
}  # fmt: skip


class ModelShape(Protocol):
    """What the plan needs from a ``ModelConfig``."""

    num_layers: int
    num_kv_heads: int
    head_dim: int
    max_position: int

    def kv_bytes_per_token(self, dtype_bytes: int) -> int: ...


@dataclass(slots=True)
class MemoryPlan:
    """The KV-cache budget of one model under one memory limit."""

    dtype: str
    kv_bytes_per_token: int
    weights_bytes: int
    memory_bytes: int
    block_size: int
    num_blocks: int
    max_len: int

    @property
    def kv_budget_bytes(self) -> int:
        return self.memory_bytes - self.weights_bytes

    @property
    def block_bytes(self) -> int:
        return self.kv_bytes_per_token * self.block_size

    @property
    def num_tokens(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def concurrent_sequences(self) -> int:
        """Sequences of ``max_len`` tokens that fit side by side (with no prefix shared)."""
        return self.num_blocks // math.ceil(self.max_len / self.block_size)


def parse_size(text: str) -> int:
    """Bytes from '8GiB', '512M', '1.5GB' or '1048576' (K/M/G alone are binary units)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise UserError(f"cannot read the size {text!r}: write it like 8GiB, 512MiB or 2000000000")
    return int(float(match.group(1)) * _UNITS[unit])


def parse_dtype(text: str) -> str:
    """The canonical name of a KV/weights dtype: bf16, f16 or f32."""
    name = _DTYPE_ALIASES.get(text.lower(), text.lower())
    if name not in DTYPE_BYTES:
        raise UserError(f"unknown dtype {text!r}: use one of {', '.join(DTYPE_BYTES)}")
    return name


def format_bytes(n: int) -> str:
    """Binary units, e.g. '128 KiB', '7.5 GiB'."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if size == int(size) else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def weight_parameters(path: Path) -> int | None:
    """Number of weight elements in a GGUF file or a folder of safetensors; None if unknown."""
    if path.is_dir():
        files = sorted(path.glob("*.safetensors"))
        return sum(_safetensors_elements(f) for f in files) if files else None
    from backends.gguf.reader import read_gguf

    try:
        with read_gguf(path, arrays=False) as reader:
            return sum(t.n_elements for t in reader.tensors)
    except UserError:
        return None


def _safetensors_elements(path: Path) -> int:
    with path.open("rb") as fh:
        (length,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(length))
    return sum(math.prod(v["shape"]) for k, v in header.items() if k != "__metadata__")


def plan_memory(
    config: ModelShape,
    weights_bytes: int,
    memory_bytes: int,
    dtype: str = "bf16",
    block_size: int = 16,
    max_len: int | None = None,
) -> MemoryPlan:
    """Blocks of ``block_size`` tokens that fit in ``memory_bytes`` once the weights are loaded."""
    if block_size < 1:
        raise UserError(f"--block-size must be at least 1, got {block_size}")
    if max_len is not None and max_len < 1:
        raise UserError(f"--max-len must be at least 1, got {max_len}")
    per_token = config.kv_bytes_per_token(DTYPE_BYTES[dtype])
    free = memory_bytes - weights_bytes
    if free < per_token * block_size:
        raise UserError(
            f"the weights take {format_bytes(weights_bytes)} of the {format_bytes(memory_bytes)}"
            " budget and leave no room for one KV block: raise --memory"
        )
    return MemoryPlan(
        dtype=dtype,
        kv_bytes_per_token=per_token,
        weights_bytes=weights_bytes,
        memory_bytes=memory_bytes,
        block_size=block_size,
        num_blocks=free // (per_token * block_size),
        max_len=max_len or config.max_position,
    )
