"""What a model file is: GGUF metadata read straight from the file header, for ``agent models``.

The header is read with a small reader of the GGUF format (version 2 and 3, little-endian)
rather than ``gguf.GGUFReader``: the latter maps every tensor and every vocabulary string into
numpy objects, about 4 s for the bundled 98 MB model on a small CPU, where reading the header
takes a fraction of a second. Large arrays (the vocabulary, merges) are skipped unless asked for.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import UserError
from backends.gguf.default_model import check_gguf

# GGUF value types: struct format of the scalars; 8 = string, 9 = array.
_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_STRING, _ARRAY = 8, 9

# ggml tensor types and llama.cpp file types, by number (gguf.constants has the full lists).
_TENSOR_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
    10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS",
    17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S",
    23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 30: "BF16",
    34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4",
}  # fmt: skip
_FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M",
    30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
}  # fmt: skip


@dataclass(slots=True)
class GGUFHeader:
    """A GGUF file's metadata and tensor shapes (no tensor data)."""

    version: int
    metadata: dict[str, Any]
    # The length of every array, kept or skipped.
    array_lengths: dict[str, int] = field(default_factory=dict)
    # Tensor name -> (shape, ggml type number).
    tensors: dict[str, tuple[tuple[int, ...], int]] = field(default_factory=dict)


def read_gguf_header(
    path: Path, keep_arrays: Collection[str] = (), tensors: bool = False
) -> GGUFHeader:
    """Read the metadata (arrays only those named in ``keep_arrays``) and optionally tensor info."""
    path = check_gguf(Path(path))
    try:
        with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _Reader(buf).header(keep_arrays, tensors)
    except (struct.error, ValueError, UnicodeDecodeError, OverflowError) as exc:
        raise UserError(
            f"{path} is not a readable GGUF file (damaged or truncated: {exc})"
        ) from None


class _Reader:
    def __init__(self, buf: mmap.mmap) -> None:
        self.buf = buf
        self.pos = 4  # past the magic, which check_gguf has seen

    def unpack(self, fmt: str) -> Any:
        (value,) = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return value

    def string(self) -> str:
        n = self.unpack("Q")
        if self.pos + n > len(self.buf):
            raise ValueError("a string runs past the end of the file")
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        return raw.decode("utf-8", "replace")

    def value(self, kind: int) -> Any:
        if kind == _STRING:
            return self.string()
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        raise ValueError(f"unknown value type {kind}")

    def skip_array(self, kind: int, count: int) -> None:
        if kind in _SCALARS:
            self.pos += struct.calcsize("<" + _SCALARS[kind]) * count
        elif kind == _STRING:
            for _ in range(count):
                self.pos += 8 + struct.unpack_from("<Q", self.buf, self.pos)[0]
        else:
            raise ValueError("nested arrays are not skipped")
        if self.pos > len(self.buf):
            raise ValueError("an array runs past the end of the file")

    def header(self, keep_arrays: Collection[str], tensors: bool) -> GGUFHeader:
        version = self.unpack("I")
        if version < 2:
            raise ValueError(f"GGUF version {version} is too old")
        n_tensors, n_kv = self.unpack("Q"), self.unpack("Q")
        out = GGUFHeader(version, {})
        for _ in range(n_kv):
            key, kind = self.string(), self.unpack("I")
            if kind != _ARRAY:
                out.metadata[key] = self.value(kind)
                continue
            item_kind, count = self.unpack("I"), self.unpack("Q")
            out.array_lengths[key] = count
            if key in keep_arrays:
                out.metadata[key] = [self.value(item_kind) for _ in range(count)]
            else:
                self.skip_array(item_kind, count)
        if tensors:
            for _ in range(n_tensors):
                name, n_dims = self.string(), self.unpack("I")
                shape = tuple(self.unpack("Q") for _ in range(n_dims))
                kind, _offset = self.unpack("I"), self.unpack("Q")
                out.tensors[name] = (shape, kind)
        return out


def describe_model(path: Path) -> dict[str, Any]:
    """Path, size, architecture, parameters, context, layers, quantization, chat template."""
    path = Path(path).expanduser()
    header = read_gguf_header(path, tensors=True)
    meta = header.metadata
    arch = str(meta.get("general.architecture", "unknown"))
    params = 0
    type_counts: dict[str, int] = {}
    for shape, kind in header.tensors.values():
        n = 1
        for dim in shape:
            n *= dim
        params += n
        name = _TENSOR_TYPES.get(kind, f"type {kind}")
        type_counts[name] = type_counts.get(name, 0) + n
    file_type = meta.get("general.file_type")
    if isinstance(file_type, int):
        quant = _FILE_TYPES.get(file_type, f"file type {file_type}")
    else:  # older files do not say: name the type that holds most weights
        quant = max(type_counts, key=lambda t: type_counts[t]) if type_counts else "unknown"
    return {
        "path": str(path.resolve()),
        "size_bytes": path.stat().st_size,
        "name": meta.get("general.name"),
        "architecture": arch,
        "parameters": params or None,
        "context_length": meta.get(f"{arch}.context_length"),
        "layers": meta.get(f"{arch}.block_count"),
        "embedding_length": meta.get(f"{arch}.embedding_length"),
        "quantization": quant,
        "vocab_size": header.array_lengths.get("tokenizer.ggml.tokens"),
        "chat_template": "tokenizer.chat_template" in meta,
    }


def gguf_tokenizer_strings(path: Path) -> dict[str, str]:
    """The chat template and BOS/EOS token texts of a GGUF file (absent ones left out)."""
    header = read_gguf_header(path, keep_arrays=("tokenizer.ggml.tokens",))
    meta = header.metadata
    out: dict[str, str] = {}
    if isinstance(meta.get("tokenizer.chat_template"), str):
        out["chat_template"] = meta["tokenizer.chat_template"]
    tokens = meta.get("tokenizer.ggml.tokens") or []
    for key in ("bos", "eos"):
        token_id = meta.get(f"tokenizer.ggml.{key}_token_id")
        if isinstance(token_id, int) and 0 <= token_id < len(tokens):
            out[f"{key}_token"] = str(tokens[token_id])
    return out
