"""The weight cache: a second load of the bundled model maps what the first one wrote."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from agent.errors import UserError
from backends.engine.model import loader
from backends.engine.model.loader import load_model
from backends.engine.weights import weight_cache
from backends.gguf.default_model import default_model_path


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the bundled GGUF, so the tests can change its modification time."""
    try:
        source = default_model_path()
    except UserError:
        pytest.skip("the bundled model is not installed")
    copy = tmp_path_factory.mktemp("model") / source.name
    shutil.copyfile(source, copy)
    return copy


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLAWLOOP_CACHE_DIR", str(tmp_path))
    return tmp_path / "weights"


def _no_source_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the model was read from its file, not from the cache")

    monkeypatch.setattr(loader, "_read_source", refuse)


def _same_model(a: loader.LoadedModel, b: loader.LoadedModel) -> None:
    assert a.config == b.config
    state_a, state_b = a.model.state_dict(), b.model.state_dict()
    assert state_a.keys() == state_b.keys()
    for name, value in state_a.items():
        assert torch.equal(value, state_b[name]), name
    text = "Count the lines of README.md, then say <|im_end|> and café."
    assert a.tokenizer.encode(text) == b.tokenizer.encode(text)
    assert a.tokenizer.chat_template == b.tokenizer.chat_template
    assert a.tokenizer.eos_token_ids == b.tokenizer.eos_token_ids


@pytest.mark.slow
def test_a_second_load_comes_from_the_cache_and_equals_the_first(
    model_file: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = load_model(model_file, cache=True)
    (entry,) = cache_dir.glob(f"*{weight_cache.SUFFIX}")
    _no_source_reads(monkeypatch)
    cached = load_model(model_file, cache=True)
    _same_model(fresh, cached)
    with torch.inference_mode():
        ids = torch.tensor(fresh.tokenizer.encode("The capital of France is"))
        assert torch.equal(
            fresh.model.logits(fresh.model.embed(ids)), cached.model.logits(cached.model.embed(ids))
        )
    assert entry.is_file()


@pytest.mark.slow
def test_a_changed_file_or_setting_misses(model_file: Path, cache_dir: Path) -> None:
    load_model(model_file, weights="int4", cache=True)
    key = weight_cache.cache_key(model_file, None, "int4", str(torch.float32))
    assert weight_cache.load(key) is not None
    assert weight_cache.cache_key(model_file, None, "int8", str(torch.float32)) != key
    assert weight_cache.cache_key(model_file, model_file, "int4", str(torch.float32)) != key
    stat = model_file.stat()
    os.utime(model_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert weight_cache.cache_key(model_file, None, "int4", str(torch.float32)) != key


@pytest.mark.slow
def test_a_damaged_entry_is_a_miss_and_is_replaced(
    model_file: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = load_model(model_file, weights="int4", cache=True)
    (entry,) = cache_dir.glob(f"*{weight_cache.SUFFIX}")
    data = entry.read_bytes()
    entry.write_bytes(data[: len(data) // 2])  # as a full disk or a kill mid-write would leave it
    reloaded = load_model(model_file, weights="int4", cache=True)
    _same_model(fresh, reloaded)
    assert entry.stat().st_size == len(data)  # written again, whole
    _no_source_reads(monkeypatch)
    _same_model(fresh, load_model(model_file, weights="int4", cache=True))


def test_an_entry_written_for_another_key_is_not_used(tmp_path: Path) -> None:
    tensors = {"norm.weight": torch.ones(4)}
    model = weight_cache.CachedModel(_config(), _tokenizer(), dict(tensors))  # type: ignore[arg-type]
    written = weight_cache.store("a" * 32, model, tmp_path)
    assert written is not None and weight_cache.load("a" * 32, tmp_path) is not None
    written.rename(tmp_path / f"{'b' * 32}{weight_cache.SUFFIX}")
    assert weight_cache.load("b" * 32, tmp_path) is None
    assert not list(tmp_path.glob(f"*{weight_cache.SUFFIX}"))


def test_only_the_most_recent_entries_are_kept(tmp_path: Path) -> None:
    model = weight_cache.CachedModel(_config(), _tokenizer(), {"x": torch.zeros(2)})  # type: ignore[arg-type]
    for index, key in enumerate(("1" * 32, "2" * 32, "3" * 32)):
        path = weight_cache.store(key, model, tmp_path)
        assert path is not None
        os.utime(path, (1_000_000 + index, 1_000_000 + index))
    weight_cache.prune(tmp_path)
    kept = sorted(p.name[:1] for p in tmp_path.glob(f"*{weight_cache.SUFFIX}"))
    assert kept == ["2", "3"][-weight_cache.KEEP :]


def test_an_unwritable_cache_folder_leaves_the_load_to_the_source(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    model = weight_cache.CachedModel(_config(), _tokenizer(), {"x": torch.zeros(2)})  # type: ignore[arg-type]
    assert weight_cache.store("c" * 32, model, blocker) is None


def _config() -> object:
    from backends.engine.config import ModelConfig

    return ModelConfig("llama", 1, 8, 16, 2, 1, 4, 10, 10000.0, 1e-5, 32, True)


def _tokenizer() -> object:
    from tokenizers import Tokenizer, models

    from backends.engine.tokenizer import EngineTokenizer

    hf = Tokenizer(models.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    return EngineTokenizer(hf, [1], "<s>", "</s>", None, byte_level=False)
