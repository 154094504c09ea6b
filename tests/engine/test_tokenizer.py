"""The engine tokenizer rebuilt from GGUF metadata against transformers and llama.cpp."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backends.engine.tokenizer import EngineTokenizer, load_tokenizer
from backends.gguf.default_model import default_model_path

TEXTS = [
    "Hello world",
    "The capital of France is Paris.",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
    "<|im_start|>assistant\n",
    'def f(x: int) -> int:\n    """Square."""\n    return x ** 2  # done\n\n\n\tindented\r\n',
    "héllo wörld — naïve café, Ünïcödé; 日本語のテキスト, 한국어, русский, עברית 🤖🚀👍🏽",
    "  leading and trailing spaces   \n\n  ",
    "it's they're I'd we'll you've SHE'S",
    "numbers 12345 3.14159 1,000,000 0x1F 2024-11-30",
    '<tool_call>{"name": "read_file", "arguments": {"path": "/tmp/a b.txt"}}</tool_call>',
    "<|endoftext|><|im_end|>x<|im_start|>",
    "",
]


@pytest.fixture(scope="module")
def tokenizer() -> EngineTokenizer:
    return load_tokenizer(default_model_path())


def test_matches_transformers_gguf_tokenizer(tokenizer: EngineTokenizer) -> None:
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    path = default_model_path()
    reference = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    for text in TEXTS:
        assert tokenizer.encode(text) == reference.encode(text, add_special_tokens=False), text


def test_matches_llama_cpp(tokenizer: EngineTokenizer) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    vocab = llama_cpp.Llama(model_path=str(default_model_path()), vocab_only=True, verbose=False)
    for text in TEXTS:
        expected = vocab.tokenize(text.encode(), add_bos=False, special=True)
        assert tokenizer.encode(text) == expected, text


def test_special_tokens_and_roundtrip(tokenizer: EngineTokenizer) -> None:
    assert tokenizer.encode("<|im_start|>user")[0] == 1
    assert tokenizer.encode("a<|im_end|>b")[1] == 2
    assert tokenizer.eos_token_ids == [2]
    assert (tokenizer.bos_token, tokenizer.eos_token) == ("<|im_start|>", "<|im_end|>")
    assert tokenizer.vocab_size == 49152
    assert tokenizer.chat_template is not None and "<|im_start|>" in tokenizer.chat_template
    for text in TEXTS:
        assert tokenizer.decode(tokenizer.encode(text)) == text
    assert tokenizer.decode([1, 2], skip_special_tokens=True) == ""


def test_token_bytes_concatenate_to_the_text(tokenizer: EngineTokenizer) -> None:
    table = tokenizer.id_to_token_bytes()
    assert len(table) == tokenizer.vocab_size
    assert table[1] == b"<|im_start|>"
    for text in TEXTS:
        assert b"".join(table[i] for i in tokenizer.encode(text)) == text.encode()


def test_folder_tokenizer(tmp_path: Path, tokenizer: EngineTokenizer) -> None:
    tokenizer.hf.save(str(tmp_path / "tokenizer.json"))
    settings = {
        "bos_token": {"content": "<|im_start|>"},
        "eos_token": "<|endoftext|>",
        "chat_template": [
            {"name": "default", "template": "T"},
            {"name": "tool_use", "template": "U"},
        ],
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(settings))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [0, 2]}))
    folder = load_tokenizer(tmp_path)
    assert folder.eos_token_ids == [0, 2]
    assert (folder.bos_token, folder.eos_token, folder.chat_template) == (
        "<|im_start|>",
        "<|endoftext|>",
        "T",
    )
    for text in TEXTS:
        assert folder.encode(text) == tokenizer.encode(text)


def write_sentencepiece_gguf(path: Path) -> None:
    """A tiny GGUF with a SentencePiece-style ("llama") vocabulary: pieces, scores, byte tokens."""
    gguf = pytest.importorskip("gguf")
    words = ["hello", "world", "help", "low", "held", "or", "he", "ll", "lo", "wor", "rld"]
    spelled = [*words, *("\u2581" + w for w in words)]
    pieces = sorted({w[:i] for w in spelled for i in range(2, len(w) + 1)})
    letters = sorted({c for w in words for c in w} | {"\u2581"})
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *letters, *pieces]
    types = [2, 3, 3, *([6] * 256), *([1] * (len(letters) + len(pieces)))]
    scores = [0.0] * (3 + 256) + [-1000.0 - i for i in range(len(letters))]
    scores += [-float(len(p)) for p in pieces]  # shorter pieces merge first
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_context_length(64)
    writer.add_embedding_length(8)
    writer.add_feed_forward_length(16)
    writer.add_head_count(2)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_space_prefix(True)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_sentencepiece_gguf_matches_transformers(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    path = tmp_path / "sp.gguf"
    write_sentencepiece_gguf(path)
    ours = load_tokenizer(path)
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file=path.name)
    texts = [
        "hello world",
        "help held low",
        " world  hello",
        "héllo wörld 🤖",
        "hello</s>world",
        "",
    ]
    for text in texts:
        ids = ours.encode(text)
        assert ids == theirs.encode(text, add_special_tokens=False), text
        assert ours.decode(ids) == theirs.decode(ids), text
    assert ours.eos_token_ids == [2] and ours.bos_token == "<s>"
    assert ours.encode("hello") == [ours.hf.token_to_id("\u2581hello")]
