"""Model loading: GGUF dequantization per type, config reading, and Hugging Face folders."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch

from agent.errors import UserError
from backends.engine.config import read_config
from backends.engine.model.loader import load_model
from backends.engine.weights.gguf_weights import dequantize_tensor
from backends.gguf.default_model import default_model_path
from backends.gguf.reader import read_gguf

Q = gguf.GGMLQuantizationType
QUANTIZABLE = {"F32": 0.0, "F16": 1e-3, "BF16": 1e-2, "Q8_0": 0.02, "Q4_0": 0.35, "Q4_1": 0.3}


def _raw_k_blocks(kind: str, rows: int, seed: int) -> np.ndarray:
    """Random K-quant blocks (gguf cannot quantize these) with sane float16 scales."""
    block_bytes = {"Q4_K": 144, "Q6_K": 210}[kind]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=(rows, 2 * block_bytes), dtype=np.uint8)  # 2 blocks per row
    blocks = raw.reshape(-1, block_bytes)
    scales = np.array([0.01, 0.002], dtype=np.float16).view(np.uint8)
    if kind == "Q4_K":
        blocks[:, 0:4] = scales  # d, dmin
    else:
        blocks[:, 208:210] = scales[:2]  # d
    return raw


@pytest.fixture(scope="module")
def quant_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    """A GGUF file holding one small tensor per type, and the values each should decode to."""
    path = tmp_path_factory.mktemp("gguf") / "types.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    expected: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(0)
    for kind in QUANTIZABLE:
        values = rng.standard_normal((6, 64)).astype(np.float32)
        data = gguf.quants.quantize(values, Q[kind])
        writer.add_tensor(kind, data, raw_dtype=Q[kind])
        expected[kind] = values
    for seed, kind in enumerate(("Q4_K", "Q6_K")):
        raw = _raw_k_blocks(kind, 3, seed)
        writer.add_tensor(kind, raw, raw_dtype=Q[kind])
        expected[kind] = gguf.quants.dequantize(raw, Q[kind])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path, expected


@pytest.mark.parametrize("kind", [*QUANTIZABLE, "Q4_K", "Q6_K"])
def test_dequantize_matches_gguf(quant_file: tuple[Path, dict[str, np.ndarray]], kind: str) -> None:
    path, expected = quant_file
    ours = read_gguf(path)
    theirs = gguf.GGUFReader(str(path))
    [tensor] = [t for t in ours.tensors if t.name == kind]
    [reference] = [t for t in theirs.tensors if t.name == kind]
    values = dequantize_tensor(ours, tensor)
    want = torch.from_numpy(np.asarray(gguf.quants.dequantize(reference.data, Q[kind])).copy())
    assert values.dtype == torch.float32
    assert tuple(values.shape) == tuple(expected[kind].shape)
    torch.testing.assert_close(values, want.reshape(values.shape), rtol=0, atol=0)
    if kind in QUANTIZABLE:  # and close to what was quantized, within the format's error
        error = (values - torch.from_numpy(expected[kind])).abs().max().item()
        assert error <= QUANTIZABLE[kind]


def test_bundled_gguf_config() -> None:
    config = read_config(default_model_path())
    assert (config.architecture, config.num_layers, config.hidden_size) == ("llama", 30, 576)
    assert (config.num_heads, config.num_kv_heads, config.head_dim) == (9, 3, 64)
    assert (config.vocab_size, config.intermediate_size) == (49152, 1536)
    assert config.rope_theta == 100000.0 and config.tie_embeddings and not config.qk_norm
    assert config.kv_bytes_per_token(4) == 46080


def test_bad_paths_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError):
        read_config(tmp_path / "missing.gguf")
    (tmp_path / "junk.gguf").write_bytes(b"not a model")
    with pytest.raises(UserError):
        read_config(tmp_path / "junk.gguf")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt_neox"}))
    with pytest.raises(UserError, match="not supported"):
        read_config(tmp_path)


# ---- Hugging Face folders: tiny random models written here, compared with transformers ----

TINY = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
}
VARIANTS = {
    "llama": {"model_type": "llama", "architectures": ["LlamaForCausalLM"]},
    "llama3-rope": {
        "model_type": "llama",
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32,
        },
    },
    "qwen2": {"model_type": "qwen2", "tie_word_embeddings": True},
    "qwen3": {"model_type": "qwen3", "head_dim": 32},
}


def write_tiny_model(folder: Path, variant: str) -> Path:
    """A random tiny model saved the way transformers saves one (config.json + safetensors)."""
    transformers = pytest.importorskip("transformers")
    from safetensors.torch import save_file

    from backends.engine.tokenizer import load_tokenizer

    raw = {**TINY, **VARIANTS[variant]}
    tokenizer = load_tokenizer(default_model_path())
    raw["vocab_size"] = tokenizer.vocab_size
    config = transformers.AutoConfig.for_model(**raw)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file(state, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(raw))
    tokenizer.hf.save(str(folder / "tokenizer.json"))
    settings = {"eos_token": "<|im_end|>", "bos_token": "<|im_start|>", "chat_template": "{{x}}"}
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    return folder


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_hf_folder_matches_transformers(tmp_path: Path, variant: str) -> None:
    transformers = pytest.importorskip("transformers")
    from backends.engine.model.attention import plan_cpu_attention
    from backends.engine.model.model_runner import StoreThenAttend

    folder = write_tiny_model(tmp_path / variant, variant)
    loaded = load_model(folder, weights="float32")
    config = loaded.config
    assert config.architecture == VARIANTS[variant]["model_type"]
    assert loaded.tokenizer.eos_token_ids == [2] and loaded.tokenizer.chat_template == "{{x}}"
    reference = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    ids = torch.randint(0, config.vocab_size, (70,), generator=torch.Generator().manual_seed(1))
    cache = torch.zeros(8, 16, config.num_kv_heads, config.head_dim)
    caches = [(cache.clone(), cache.clone()) for _ in range(config.num_layers)]
    plan = plan_cpu_attention([70], [70], [[3, 1, 4, 0, 2]], 16, config.head_dim**-0.5)
    slots = torch.tensor([[3, 1, 4, 0, 2][p // 16] * 16 + p % 16 for p in range(70)])
    with torch.inference_mode():
        hidden = loaded.model(ids, torch.arange(70), StoreThenAttend(slots, plan), caches)
        ours = loaded.model.logits(hidden)
        theirs = reference(ids[None]).logits[0]
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)


def test_kept_rows_get_their_own_hidden_states_and_every_token_is_cached(tmp_path: Path) -> None:
    """``keep``: the last layer runs its projection and MLP on the kept rows alone; their hidden
    states are those of the full forward, and every token's keys and values are still stored."""
    from backends.engine.model.attention import plan_cpu_attention
    from backends.engine.model.model_runner import StoreThenAttend

    loaded = load_model(write_tiny_model(tmp_path / "tiny", "llama"), weights="float32")
    config = loaded.config
    ids = torch.randint(0, config.vocab_size, (70,), generator=torch.Generator().manual_seed(2))
    table = [3, 1, 4, 0, 2]
    slots = torch.tensor([table[p // 16] * 16 + p % 16 for p in range(70)])
    results = []
    for keep in (None, torch.tensor([69, 5]), torch.tensor([], dtype=torch.long)):
        cache = torch.zeros(8, 16, config.num_kv_heads, config.head_dim)
        caches = [(cache.clone(), cache.clone()) for _ in range(config.num_layers)]
        plan = plan_cpu_attention([70], [70], [table], 16, config.head_dim**-0.5)
        with torch.inference_mode():
            hidden = loaded.model(ids, torch.arange(70), StoreThenAttend(slots, plan), caches, keep)
        results.append((hidden, caches))
    (full, full_caches), (kept, kept_caches), (none, none_caches) = results
    assert kept.shape == (2, config.hidden_size) and none.shape == (0, config.hidden_size)
    torch.testing.assert_close(kept, full[[69, 5]], atol=1e-5, rtol=1e-5)
    for caches in (kept_caches, none_caches):
        for (k, v), (k_full, v_full) in zip(caches, full_caches, strict=True):
            assert torch.equal(k, k_full) and torch.equal(v, v_full)


def test_progress_bar_and_dtype(tmp_path: Path) -> None:
    folder = write_tiny_model(tmp_path / "tiny", "llama")
    loaded = load_model(folder, dtype=torch.bfloat16, show_progress=True)
    assert loaded.model.embed.dtype == torch.bfloat16
    assert read_config(folder) == loaded.config
