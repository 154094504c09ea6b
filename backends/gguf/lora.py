"""LoRA adapters as GGUF files, the format llama.cpp's ``convert_lora_to_gguf.py`` writes.

Metadata: ``general.type = "adapter"``, ``adapter.type = "lora"``, ``adapter.lora.alpha``.
Each adapted weight ``W`` (a base tensor such as ``blk.0.attn_q.weight``, shape out x in) has
two tensors, ``NAME.lora_a`` (rank x in) and ``NAME.lora_b`` (out x rank), and the adapted
weight is ``W + scale * alpha / rank * (lora_b @ lora_a)``, with llama.cpp's own layout (Q and
K rows permuted, as in the base GGUF). Both local backends read these files: llama.cpp through
``lora_path``, the bundled engine by merging the product into the weights at load.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import UserError
from backends.gguf.reader import GGUFFile, read_gguf

ADAPTER_HINT = "pass a LoRA adapter written by `agent train` (a .gguf file), or --adapter none"


@dataclass(slots=True)
class LoraAdapter:
    """A LoRA adapter in llama.cpp's layout: base tensor name -> (lora_a, lora_b) numpy arrays."""

    alpha: float
    pairs: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    architecture: str = "llama"

    @property
    def rank(self) -> int:
        """The rank (rows of lora_a), the same for every pair."""
        first = next(iter(self.pairs.values()))
        return int(first[0].shape[0])

    def factors(self, name: str) -> tuple[Any, Any] | None:
        """``(lora_a, alpha / rank * lora_b)`` for a base tensor (float32 numpy), or None:
        the delta is their product, ``up @ down``."""
        pair = self.pairs.get(name)
        if pair is None:
            return None
        a, b = pair
        return a.astype("float32"), b.astype("float32") * (self.alpha / a.shape[0])

    def delta(self, name: str) -> Any | None:
        """``alpha / rank * (lora_b @ lora_a)`` for a base tensor (float32 numpy), or None."""
        pair = self.pairs.get(name)
        if pair is None:
            return None
        a, b = pair
        return (b.astype("float32") @ a.astype("float32")) * (self.alpha / a.shape[0])


def write_adapter(path: Path, adapter: LoraAdapter, extra: dict[str, str] | None = None) -> None:
    """Write ``adapter`` as a GGUF LoRA file (float32 tensors)."""
    import gguf
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), adapter.architecture)
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(adapter.alpha))
    for key, value in (extra or {}).items():
        writer.add_string(key, value)
    for name, (a, b) in sorted(adapter.pairs.items()):
        writer.add_tensor(f"{name}.lora_a", np.ascontiguousarray(a, dtype=np.float32))
        writer.add_tensor(f"{name}.lora_b", np.ascontiguousarray(b, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def check_adapter(path: Path) -> Path:
    """``path`` if it is a GGUF file, else a UserError that says what to pass."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise UserError(f"adapter {path} does not exist: {ADAPTER_HINT}")
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise UserError(f"adapter {path} is not a GGUF file: {ADAPTER_HINT}")
    return path


def read_adapter(path: Path) -> LoraAdapter:
    """Read a GGUF LoRA adapter; a file that is not one is a UserError."""
    with read_gguf(check_adapter(path)) as reader:
        return _adapter(reader, path)


def _adapter(reader: GGUFFile, path: Path) -> LoraAdapter:
    import numpy as np

    def text(key: str) -> str | None:
        found = reader.get(key)
        return None if found is None else str(found)

    if text("general.type") != "adapter" or text("adapter.type") != "lora":
        raise UserError(f"{path} is a GGUF file but not a LoRA adapter: {ADAPTER_HINT}")
    halves: dict[str, dict[str, Any]] = {}
    for tensor in reader.tensors:
        base, _, part = tensor.name.rpartition(".")
        if part in ("lora_a", "lora_b"):
            # A copy: the file is unmapped once read.
            halves.setdefault(base, {})[part] = np.array(
                reader.tensor_array(tensor), dtype=np.float32
            )
    pairs = {n: (h["lora_a"], h["lora_b"]) for n, h in halves.items() if len(h) == 2}
    if not pairs:
        raise UserError(f"{path} holds no lora_a/lora_b tensors: {ADAPTER_HINT}")
    alpha = reader.get("adapter.lora.alpha")
    alpha = float(alpha) if alpha is not None else 1.0
    return LoraAdapter(alpha, pairs, text("general.architecture") or "llama")


def adapter_path(value: str | Path | None, default: Path | None = None) -> Path | None:
    """The adapter a backend option names: ``default`` when unset or empty, None for "none",
    else a checked path."""
    if value is None or not str(value).strip():
        return default
    if str(value).strip().lower() == "none":
        return None
    return check_adapter(Path(str(value)))
