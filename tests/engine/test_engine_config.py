"""One EngineConfig, built where the settings are read and handed whole to every part."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import torch

from agent.errors import UserError
from backends.engine.backend import engine_config, load_engine
from backends.engine.config import EngineSettings
from backends.engine.core.engine_config import EngineConfig
from backends.engine.core.params import SamplingParams
from tests.engine.test_loader import write_tiny_model

# Settings that are not the engine's to be built from: how long the resident host keeps it
# loaded, and speculation, which each backend sharing one engine sets for itself.
NOT_THE_ENGINES = {"keep_alive", "num_speculative_tokens"}
# Resolved rather than copied: the device (the settings' or the one torch finds) and whether the
# disk cache is on (it defaults by device).
RESOLVED = {"device", "disk_cache"}
# A value other than the default for every setting the config carries as it is.
CHANGED: dict[str, Any] = {
    "dtype": "bfloat16",
    "weights": "int8",
    "kv_dtype": "float16",
    "kv_cache_bytes": 12345,
    "block_size": 32,
    "max_num_seqs": 3,
    "max_num_batched_tokens": 99,
    "enable_prefix_caching": False,
    "long_prefill_token_threshold": 7,
    "max_model_len": 77,
    "jump_forward": False,
    "weight_cache": False,
    "disk_cache_mib": 5,
}


def test_every_engine_setting_is_carried_into_the_config(tmp_path: Path) -> None:
    names = set(EngineSettings.model_fields)
    carried = names & {f.name for f in fields(EngineConfig)}
    assert names - carried == NOT_THE_ENGINES, "a new engine setting needs its EngineConfig field"
    assert set(CHANGED) == carried - RESOLVED
    assert all(value != EngineSettings.model_fields[k].default for k, value in CHANGED.items())
    config = engine_config(EngineSettings.from_options(CHANGED), tmp_path / "m.gguf", None, "cpu")
    assert {name: getattr(config, name) for name in CHANGED} == CHANGED
    assert config.model == tmp_path / "m.gguf" and config.device == "cpu"


@pytest.mark.parametrize(
    ("options", "device", "on"),
    [
        ({}, "cpu", True),
        ({}, "cuda", False),
        ({"disk_cache": True}, "cuda", True),
        ({"disk_cache": False}, "cpu", False),
        ({"disk_cache": True, "enable_prefix_caching": False}, "cpu", False),
    ],
)
def test_the_disk_cache_is_resolved_for_the_device(
    tmp_path: Path, options: dict[str, Any], device: str, on: bool
) -> None:
    settings = EngineSettings.from_options(options)
    assert engine_config(settings, tmp_path / "m.gguf", None, device).disk_cache is on


def test_settings_reach_the_runner_and_the_scheduler_whole(tmp_path: Path) -> None:
    """Through load_engine, as `agent run -b engine` and `agent serve` build the engine: each
    part reads the one config it was handed, and nothing in between names a setting."""
    folder = write_tiny_model(tmp_path / "tiny", "llama")
    loaded = load_engine(
        str(folder),
        "none",
        block_size=8,
        kv_cache_bytes=1 << 20,
        max_num_seqs=3,
        max_num_batched_tokens=40,
        long_prefill_token_threshold=8,
        max_model_len=100,
        jump_forward=False,
        weights="float32",
        kv_dtype="float32",
        weight_cache=False,
        disk_cache=False,
    )
    engine = loaded.engine
    runner: Any = engine.runner
    try:
        assert runner.engine_config is engine.config  # one object, not copies of its values
        assert engine.config.model == folder and engine.config.adapter is None
        assert runner.block_size == 8 and engine.block_manager.block_size == 8
        assert runner.num_blocks == (1 << 20) // (8 * runner.config.kv_bytes_per_token(4))
        assert runner.weights == "float32" and runner.kv_dtype == torch.float32
        scheduler = engine.scheduler
        assert scheduler.max_num_seqs == 3 and scheduler.max_num_batched_tokens == 40
        assert scheduler.long_prefill_token_threshold == 8
        assert engine.core.config.jump_forward is False and engine.core.disk_cache is None
        assert engine.max_model_len == 100  # below the pool's 2,048 and the model's 256
        with pytest.raises(UserError, match="at most 100"):
            engine.generate([[1000] * 100], SamplingParams(temperature=0.0, max_tokens=1))
        (done,) = engine.generate([[1000] * 40], SamplingParams(temperature=0.0, max_tokens=2))
        assert len(done.token_ids) == 2
    finally:
        engine.close()


def test_speculation_defaults_on_for_the_cpu_only_and_a_setting_wins() -> None:
    from backends.engine.config import SPECULATE_ON_CPU

    unset = EngineSettings.from_options({})
    assert unset.speculation_on("cpu") == SPECULATE_ON_CPU > 0
    assert unset.speculation_on("cuda") == 0
    assert unset.speculation_on("cuda:1") == 0
    off = EngineSettings.from_options({"num_speculative_tokens": 0})
    assert off.speculation_on("cpu") == 0
    five = EngineSettings.from_options({"num_speculative_tokens": 5})
    assert five.speculation_on("cpu") == 5 and five.speculation_on("cuda") == 5
