"""The disk prefix cache on the bundled model: hits change no token, across processes too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from backends.engine.core.engine_config import EngineConfig
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.core.params import SamplingParams
from backends.engine.model.kv_transfer import gather_blocks, open_disk_cache, scatter_blocks
from backends.engine.model.model_runner import ModelRunner
from backends.gguf.default_model import default_model_path

pytestmark = pytest.mark.slow
GREEDY = SamplingParams(temperature=0.0, max_tokens=12)
SYSTEM = (
    "You are a careful assistant working in a terminal. Answer with one short sentence. "
    "You can list files, read files and count lines. Think about which tool fits the task."
)


def chat(question: str) -> str:
    return (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n"
        f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
    )


@pytest.fixture(scope="module")
def runner() -> Any:
    runner = ModelRunner(EngineConfig(default_model_path(), kv_cache_bytes=32 << 20))
    yield runner
    runner.close()


def fresh_engine(runner: Any, disk: Any) -> LLMEngine:
    """An engine with an empty block table over a zeroed pool: nothing survives but the disk."""
    for k_cache, v_cache in runner.kv_caches:
        k_cache.zero_()
        v_cache.zero_()
    return LLMEngine(runner, disk_cache=disk)


def test_greedy_tokens_with_disk_hits_equal_a_cold_run(runner: Any, tmp_path: Path) -> None:
    prompt = runner.tokenizer.encode(chat("How many lines are in README.md? " * 4))
    [cold] = fresh_engine(runner, None).generate([prompt], GREEDY)
    writer = open_disk_cache(runner, default_model_path(), None, directory=tmp_path)
    [first] = fresh_engine(runner, writer).generate([prompt], GREEDY)
    assert writer.flush(timeout=60)
    assert first.cached_tokens == 0 and writer.stats.written == len(prompt) // 16
    reader = open_disk_cache(runner, default_model_path(), None, directory=tmp_path)
    engine = fresh_engine(runner, reader)
    [warm] = engine.generate([prompt], GREEDY)
    assert warm.cached_tokens == (len(prompt) - 1) // 16 * 16
    assert reader.stats.hits == (len(prompt) - 1) // 16
    assert engine.stats.disk_cache_hits == warm.cached_tokens
    assert warm.token_ids == cold.token_ids == first.token_ids

    # A damaged file in the middle: the blocks before it hit, the rest is computed, same tokens.
    victim = reader.folder / f"{_hash_of(engine, prompt, 2):016x}.kv"
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    victim.write_bytes(bytes(data))
    damaged = open_disk_cache(runner, default_model_path(), None, directory=tmp_path)
    [again] = fresh_engine(runner, damaged).generate([prompt], GREEDY)
    assert again.token_ids == cold.token_ids
    assert again.cached_tokens == 2 * 16
    assert damaged.stats.rejected == 1


def _hash_of(engine: LLMEngine, prompt: list[int], index: int) -> int:
    from backends.engine.core.sequence import Sequence

    return engine.block_manager.block_hash(Sequence.new(-1, prompt, GREEDY), index)


def test_the_key_pins_model_adapter_weights_and_dtype(runner: Any, tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"weights")
    adapter = tmp_path / "adapter.gguf"
    adapter.write_bytes(b"lora")

    def folder(**change: Any) -> str:
        fields = {
            "config": runner.config,
            "weights": "float32",
            "dtype": torch.float32,
            "kv_dtype": torch.float32,
            "block_size": 16,
            "device": "cpu",
        }
        model_path = change.pop("model", model)
        adapter_path = change.pop("adapter", None)
        fields.update(change)
        fake = SimpleNamespace(**fields)
        return open_disk_cache(fake, model_path, adapter_path, directory=tmp_path).folder.name

    base = folder()
    assert folder() == base
    others = [
        folder(adapter=adapter),
        folder(weights="int8"),
        folder(dtype=torch.bfloat16),
        folder(kv_dtype=torch.float16),
        folder(block_size=32),
        folder(model=default_model_path()),
    ]
    os.utime(model, ns=(1, 1))  # the same file name with other contents: another mtime
    others.append(folder())
    assert len({base, *others}) == len(others) + 1


CHILD = """
import json, sys
from backends.engine.backend import load_engine
from backends.engine.core.params import SamplingParams
loaded = load_engine(kv_cache_bytes=32 << 20)
prompt = loaded.tokenizer.encode(sys.argv[1])
[result] = loaded.engine.generate([prompt], SamplingParams(temperature=0.0, max_tokens=12))
disk = loaded.engine.core.disk_cache
assert disk is not None and disk.flush(timeout=60)
print(json.dumps({"tokens": result.token_ids, "cached": result.cached_tokens,
                  "prompt": len(prompt), "written": disk.stats.written}))
"""


def test_a_second_process_gets_the_first_ones_prompt_from_disk(tmp_path: Path) -> None:
    """Two real processes through ``load_engine`` (the disk cache's default on CPU)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "CLAWLOOP_ENGINE_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[2]), *sys.path])

    def child() -> dict[str, Any]:
        text = chat("Count the lines in notes.txt and tell me the number.")
        done = subprocess.run(
            [sys.executable, "-c", CHILD, text],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))

    first = child()
    assert first["cached"] == 0 and first["written"] == first["prompt"] // 16
    assert list((tmp_path / "clawloop" / "kv").glob("*/*.kv"))
    second = child()
    assert second["cached"] == (second["prompt"] - 1) // 16 * 16 > 0
    assert second["written"] == 0
    assert second["tokens"] == first["tokens"]


CUDA = pytest.param(
    "cuda",
    marks=[
        pytest.mark.gpu,
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    ],
)


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_blocks_round_trip_through_bytes(device: str, dtype: str) -> None:
    """Blocks leave a pool as bytes and come back exactly, into other block ids."""
    kind = getattr(torch, dtype)
    pool = [
        (torch.randn(8, 16, 3, 64).to(device, kind), torch.randn(8, 16, 3, 64).to(device, kind))
        for _ in range(4)
    ]
    other = [(torch.zeros_like(k), torch.zeros_like(v)) for k, v in pool]
    values = [bytearray(v) for v in gather_blocks(pool, [5, 2])]  # as read() gives them
    assert len(values[0]) == 2 * 4 * 16 * 3 * 64 * kind.itemsize
    scatter_blocks(other, [1, 6], values)
    for (k, v), (k2, v2) in zip(pool, other, strict=True):
        assert torch.equal(k2[1], k[5]) and torch.equal(v2[1], v[5])
        assert torch.equal(k2[6], k[2]) and torch.equal(v2[6], v[2])
        assert not k2[0].any() and not v2[7].any()
