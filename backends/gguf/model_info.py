"""What a model file is: GGUF metadata read from the file header, for ``agent models``.

Large arrays (the vocabulary, merges) are skipped unless asked for (see
:mod:`backends.gguf.reader`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backends.gguf.reader import read_gguf

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


def describe_model(path: Path) -> dict[str, Any]:
    """Path, size, architecture, parameters, context, layers, quantization, chat template."""
    path = Path(path).expanduser()
    with read_gguf(path, arrays=False) as header:
        meta, tensors = header.metadata, header.tensors
        vocab_size = header.array_lengths.get("tokenizer.ggml.tokens")
    arch = str(meta.get("general.architecture", "unknown"))
    params = 0
    type_counts: dict[str, int] = {}
    for tensor in tensors:
        n = tensor.n_elements
        params += n
        kind = tensor.ggml_type
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
        "vocab_size": vocab_size,
        "chat_template": "tokenizer.chat_template" in meta,
    }


def gguf_tokenizer_strings(path: Path) -> dict[str, str]:
    """The chat template and BOS/EOS token texts of a GGUF file (absent ones left out)."""
    with read_gguf(path, arrays=("tokenizer.ggml.tokens",)) as header:
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
