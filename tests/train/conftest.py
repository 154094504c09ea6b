"""A tiny random Llama model as a GGUF file, with the bundled model's tokenizer and template,
so training and both backends can run it in seconds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backends.gguf.default_model import default_model_path
from backends.gguf.reader import read_gguf

HIDDEN, FFN, LAYERS, HEADS, KV_HEADS = 64, 128, 2, 4, 2


def write_tiny_gguf(path: Path, seed: int = 0) -> Path:
    """Write the tiny model to ``path`` (float32 tensors, tied embeddings)."""
    import gguf

    source = read_gguf(default_model_path())
    writer = gguf.GGUFWriter(str(path), "llama")
    vocab = len(source.get("tokenizer.ggml.tokens"))
    writer.add_context_length(512)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(FFN)
    writer.add_block_count(LAYERS)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_vocab_size(vocab)
    writer.add_file_type(0)
    for key, value in source.metadata.items():
        if not key.startswith("tokenizer."):
            continue
        if isinstance(value, list):
            writer.add_array(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        elif isinstance(value, bool):
            writer.add_bool(key, value)
        else:
            writer.add_uint32(key, int(value))
    rng = np.random.default_rng(seed)

    def tensor(name: str, *shape: int, scale: float = 0.08) -> None:
        writer.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    tensor("token_embd.weight", vocab, HIDDEN, scale=0.5)
    writer.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    head = HIDDEN // HEADS
    for i in range(LAYERS):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        tensor(f"blk.{i}.attn_q.weight", HEADS * head, HIDDEN)
        tensor(f"blk.{i}.attn_k.weight", KV_HEADS * head, HIDDEN)
        tensor(f"blk.{i}.attn_v.weight", KV_HEADS * head, HIDDEN)
        tensor(f"blk.{i}.attn_output.weight", HIDDEN, HEADS * head)
        tensor(f"blk.{i}.ffn_gate.weight", FFN, HIDDEN)
        tensor(f"blk.{i}.ffn_up.weight", FFN, HIDDEN)
        tensor(f"blk.{i}.ffn_down.weight", HIDDEN, FFN)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model, written once per test session."""
    pytest.importorskip("gguf")
    return write_tiny_gguf(tmp_path_factory.mktemp("tiny") / "tiny.gguf")
