"""The disk prefix cache over the fake paged runner: hits, misses, bad files, the size cap.

A fresh :class:`FakeRunner` starts with an empty cache and reads every context back through the
block tables, so a block the disk cache loads wrongly (or not at all) changes the output or fails.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

import pytest
from fake_runner import FakeRunner, reference_generate

from backends.engine.core.disk_cache import _HEADER, DiskKVCache
from backends.engine.core.engine_config import EngineConfig
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.core.params import SamplingParams

BLOCK = 4
GREEDY = SamplingParams(temperature=0.0, max_tokens=12)


def disk(folder: Path, key: str = "model-a", max_bytes: int = 1 << 30) -> DiskKVCache:
    return DiskKVCache(folder, key, BLOCK, 16 * BLOCK, max_bytes)  # FakeRunner: 16 B per token


def prompts(count: int, length: int = 37, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(256) for _ in range(length)] for _ in range(count)]


def run(folder: Path | None, batch: list[list[int]], **kwargs: object) -> tuple[LLMEngine, list]:
    """A fresh runner (empty pool) and engine over the disk cache in ``folder``; its results."""
    cache = disk(folder, **kwargs) if folder is not None else None  # type: ignore[arg-type]
    engine = LLMEngine(FakeRunner(num_blocks=256, block_size=BLOCK), disk_cache=cache)
    results = engine.generate(batch, GREEDY)
    if cache is not None:
        assert cache.flush(timeout=30)
    return engine, results


def files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.kv"))


def test_a_second_process_reads_the_prompt_blocks_back(tmp_path: Path) -> None:
    batch = prompts(3)
    expected = [reference_generate(p, GREEDY) for p in batch]
    first, cold = run(tmp_path, batch)
    assert [r.token_ids for r in cold] == expected
    assert [r.cached_tokens for r in cold] == [0, 0, 0]
    # Full prompt blocks only: 37 tokens fill 9 blocks of 4; generated tokens are not saved.
    assert len(files(tmp_path)) == 3 * 9
    second, warm = run(tmp_path, batch)
    assert [r.token_ids for r in warm] == expected
    # The block holding the last prompt token is recomputed: 9 full blocks, the 9th holds token 36.
    assert [r.cached_tokens for r in warm] == [36, 36, 36]
    assert second.runner.blocks_loaded == 27  # type: ignore[attr-defined]
    assert second.stats.disk_cache_hits == 3 * 36
    assert second.runner.tokens_computed < first.runner.tokens_computed / 2  # type: ignore[attr-defined]
    second.scheduler.check_invariants()


def test_a_longer_prompt_reuses_the_stored_prefix_and_adds_its_own(tmp_path: Path) -> None:
    base = prompts(1, length=20)[0]
    run(tmp_path, [base])
    longer = base + prompts(1, length=30, seed=5)[0]
    _, [result] = run(tmp_path, [longer])
    assert result.token_ids == reference_generate(longer, GREEDY)
    assert result.cached_tokens == 20
    assert len(files(tmp_path)) == 5 + 7  # 5 blocks of the base, then the rest of 50 tokens' 12


def test_another_model_key_misses(tmp_path: Path) -> None:
    batch = prompts(2)
    run(tmp_path, batch, key="model-a")
    _, results = run(tmp_path, batch, key="model-b")
    assert [r.cached_tokens for r in results] == [0, 0]
    # A file copied under another key's folder is refused by its header, and deleted.
    b_folder = disk(tmp_path, key="model-b").folder
    for path in files(b_folder):
        path.unlink()
    for path in files(disk(tmp_path).folder):
        shutil.copy(path, b_folder / path.name)
    engine, results = run(tmp_path, batch, key="model-b")
    assert [r.token_ids for r in results] == [reference_generate(p, GREEDY) for p in batch]
    assert [r.cached_tokens for r in results] == [0, 0]
    assert engine.core.disk_cache is not None
    assert engine.core.disk_cache.stats.rejected == 2  # each prompt's first block, then it stops


@pytest.mark.parametrize("damage", ["flip", "truncate", "tokens", "empty"])
def test_a_bad_file_is_a_miss_and_the_output_stays_right(tmp_path: Path, damage: str) -> None:
    batch = prompts(1)
    run(tmp_path, batch)
    cache = disk(tmp_path)
    engine = LLMEngine(FakeRunner(num_blocks=256, block_size=BLOCK), disk_cache=cache)
    # Damage the 4th block's file: blocks 0-2 still hit, the rest is computed.
    seq_hashes = _hashes(engine, batch[0])
    path = cache.folder / f"{seq_hashes[3]:016x}.kv"
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-1] ^= 0x40
    elif damage == "truncate":
        data = data[:-5]
    elif damage == "tokens":
        data[_HEADER.size] ^= 1  # the stored tokens: as if two prefixes collided on the hash
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    [result] = engine.generate(batch, GREEDY)
    assert result.token_ids == reference_generate(batch[0], GREEDY)
    assert result.cached_tokens == 3 * BLOCK
    assert cache.stats.rejected == 1 and cache.stats.hits == 3
    engine.scheduler.check_invariants()
    # The bad file was deleted, and this run's prefill wrote the block again.
    assert cache.flush(timeout=30)
    assert cache.stats.written == 1  # blocks 4-8 were still on disk
    assert disk(tmp_path).read(seq_hashes[3], batch[0][12:16]) is not None


def _hashes(engine: LLMEngine, prompt: list[int]) -> list[int]:
    from backends.engine.core.sequence import Sequence

    seq = Sequence.new(-1, prompt, GREEDY)
    return [engine.block_manager.block_hash(seq, i) for i in range(len(prompt) // BLOCK)]


def test_the_size_cap_evicts_the_least_recently_used(tmp_path: Path) -> None:
    file_bytes = disk(tmp_path)._file_bytes
    cache = disk(tmp_path, max_bytes=10 * file_bytes)
    tokens = list(range(BLOCK))
    values = [bytes([i]) * (16 * BLOCK) for i in range(16)]
    for i in range(8):
        cache.put([(i, tokens)], [values[i]])
        assert cache.flush(timeout=30)
        os.utime(cache.folder / f"{i:016x}.kv", (1000.0 + i, 1000.0 + i))
    assert cache.read(0, tokens) == values[0]  # a hit: block 0 is now the most recent
    for i in range(8, 13):
        cache.put([(i, tokens)], [values[i]])
        assert cache.flush(timeout=30)
    stored = sorted(int(p.stem, 16) for p in files(tmp_path))
    # Past 10 files it evicts down to 90% of the cap (9 files), oldest first: 1 and 2 when the
    # 11th is written, 3 and 4 at the 13th; 0 was refreshed by its hit.
    assert stored == [0, 5, 6, 7, 8, 9, 10, 11, 12]
    assert cache.stats.evicted == 4
    assert sum(p.stat().st_size for p in files(tmp_path)) <= 10 * file_bytes


def test_a_dead_writers_temp_files_are_removed(tmp_path: Path) -> None:
    cache = disk(tmp_path)
    cache.folder.mkdir(parents=True)
    stale = cache.folder / ".0000000000000001.kv.99.1.tmp"
    stale.write_bytes(b"half a file")
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    fresh = cache.folder / ".0000000000000002.kv.98.1.tmp"
    fresh.write_bytes(b"being written")
    cache.put([(7, list(range(BLOCK)))], [b"\x01" * (16 * BLOCK)])
    assert cache.flush(timeout=30)
    assert not stale.exists() and fresh.exists()  # only a dead writer's leftovers are removed
    assert [p.name for p in files(tmp_path)] == ["0000000000000007.kv"]


def test_the_writer_backlog_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import backends.engine.core.disk_cache as disk_cache

    monkeypatch.setattr(disk_cache, "MAX_PENDING_BYTES", 3 * 16 * BLOCK)
    batch = prompts(1)
    _, [result] = run(tmp_path, batch)
    assert result.token_ids == reference_generate(batch[0], GREEDY)
    assert len(files(tmp_path)) == 3  # one step's room: the rest waits for the prompt's next use


def test_an_unwritable_folder_costs_the_cache_not_the_request(tmp_path: Path) -> None:
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    batch = prompts(2)
    engine, results = run(blocked, batch)
    assert [r.token_ids for r in results] == [reference_generate(p, GREEDY) for p in batch]
    assert engine.core.disk_cache is not None
    assert engine.core.disk_cache.stats.written == 0
    assert engine.core.disk_cache.stats.dropped == 18


def test_preemption_and_chunked_prefill_with_disk_hits(tmp_path: Path) -> None:
    batch = prompts(12, length=45, seed=3)
    run(tmp_path, batch[:6])
    expected = [reference_generate(p, GREEDY) for p in batch]
    cache = disk(tmp_path)
    runner = FakeRunner(num_blocks=40, block_size=BLOCK)
    engine = LLMEngine(
        runner,
        EngineConfig(max_num_batched_tokens=24, long_prefill_token_threshold=8),
        disk_cache=cache,
    )
    results = engine.generate(batch, GREEDY)
    assert [r.token_ids for r in results] == expected
    assert engine.num_preemptions > 0
    assert all(r.cached_tokens == 44 for r in results[:6])
    engine.scheduler.check_invariants()


def test_close_writes_what_is_queued_and_stops_the_writer(tmp_path: Path) -> None:
    cache = disk(tmp_path)
    cache.put([(9, list(range(BLOCK)))], [b"\x02" * (16 * BLOCK)])
    writer = cache._writer
    cache.close()
    assert writer is not None
    writer.join(timeout=10)
    assert not writer.is_alive()
    assert cache.read(9, list(range(BLOCK))) == b"\x02" * (16 * BLOCK)
