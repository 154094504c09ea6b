"""GGUF header reading and model descriptions."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from agent.errors import UserError
from backends.gguf.model_info import describe_model, gguf_tokenizer_strings
from backends.gguf.reader import read_gguf
from backends.local.chat_template import ChatTemplate


def gguf_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def kv_string(key: str, value: str) -> bytes:
    return gguf_string(key) + struct.pack("<I", 8) + gguf_string(value)


def kv_u32(key: str, value: int) -> bytes:
    return gguf_string(key) + struct.pack("<II", 4, value)


def kv_string_array(key: str, values: list[str]) -> bytes:
    body = b"".join(gguf_string(v) for v in values)
    return gguf_string(key) + struct.pack("<IIQ", 9, 8, len(values)) + body


def kv_f32_array(key: str, values: list[float]) -> bytes:
    body = struct.pack(f"<{len(values)}f", *values)
    return gguf_string(key) + struct.pack("<IIQ", 9, 6, len(values)) + body


def tensor(name: str, shape: tuple[int, ...], kind: int) -> bytes:
    dims = b"".join(struct.pack("<Q", d) for d in shape)
    return gguf_string(name) + struct.pack("<I", len(shape)) + dims + struct.pack("<IQ", kind, 0)


def write_gguf(path: Path, file_type: int | None = 15) -> Path:
    kvs = [
        kv_string("general.architecture", "llama"),
        kv_string("general.name", "Tiny"),
        kv_u32("llama.context_length", 2048),
        kv_u32("llama.block_count", 2),
        kv_f32_array("tokenizer.ggml.scores", [0.0, 1.5, 2.5]),
        kv_string_array("tokenizer.ggml.tokens", ["<s>", "</s>", "hi"]),
        kv_u32("tokenizer.ggml.bos_token_id", 0),
        kv_u32("tokenizer.ggml.eos_token_id", 1),
        kv_string("tokenizer.chat_template", "{{ messages[0].content }}"),
    ]
    if file_type is not None:
        kvs.append(kv_u32("general.file_type", file_type))
    tensors = [tensor("token_embd.weight", (8, 3), 12), tensor("output_norm.weight", (8,), 0)]
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    path.write_bytes(header + b"".join(kvs) + b"".join(tensors) + b"\0" * 64)
    return path


def test_read_header_skips_arrays_unless_asked(tmp_path: Path):
    path = write_gguf(tmp_path / "tiny.gguf")
    with read_gguf(path, arrays=False) as header:
        assert header.version == 3
        assert header.metadata["llama.context_length"] == 2048
        assert "tokenizer.ggml.tokens" not in header.metadata
        assert header.array_lengths == {"tokenizer.ggml.scores": 3, "tokenizer.ggml.tokens": 3}
    with read_gguf(path, arrays=["tokenizer.ggml.scores"]) as kept:
        assert kept.metadata["tokenizer.ggml.scores"] == [0.0, 1.5, 2.5]
        # Shapes in row-major order, the reverse of the file's dimensions.
        tensors = {t.name: (t.shape, t.ggml_type) for t in kept.tensors}
        assert tensors == {"token_embd.weight": ((3, 8), 12), "output_norm.weight": ((8,), 0)}


def test_describe_a_synthetic_model(tmp_path: Path):
    info = describe_model(write_gguf(tmp_path / "tiny.gguf"))
    assert info["architecture"] == "llama" and info["name"] == "Tiny"
    assert (info["parameters"], info["context_length"], info["layers"]) == (32, 2048, 2)
    assert (info["quantization"], info["vocab_size"], info["chat_template"]) == ("Q4_K_M", 3, True)
    assert info["size_bytes"] == (tmp_path / "tiny.gguf").stat().st_size
    # Without general.file_type: the type holding most weights.
    assert describe_model(write_gguf(tmp_path / "old.gguf", None))["quantization"] == "Q4_K"


def test_tokenizer_strings_for_the_template(tmp_path: Path):
    path = write_gguf(tmp_path / "tiny.gguf")
    assert gguf_tokenizer_strings(path) == {
        "chat_template": "{{ messages[0].content }}",
        "bos_token": "<s>",
        "eos_token": "</s>",
    }
    template = ChatTemplate.from_gguf(path)
    assert (template.bos_token, template.eos_token) == ("<s>", "</s>")


def test_truncated_file_is_a_user_error(tmp_path: Path):
    full = write_gguf(tmp_path / "tiny.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(full[:150])
    with pytest.raises(UserError, match="damaged or truncated"):
        describe_model(cut)


def test_describe_the_bundled_model(bundled_model: Path):
    info = describe_model(bundled_model)
    assert info["architecture"] == "llama" and info["layers"] == 30
    assert info["context_length"] == 8192 and info["vocab_size"] == 49152
    assert info["quantization"] == "Q4_1" and info["chat_template"] is True
    assert 130e6 < info["parameters"] < 140e6
