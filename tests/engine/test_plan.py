"""``agent engine plan``: KV bytes per token and what fits, from a model's config and headers."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.errors import UserError
from backends.engine.config import read_config
from backends.engine.plan import format_bytes, parse_size, plan_memory
from cli.engine_cmd import engine_app

LLAMA3_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "head_dim": 128,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-5,
}


@pytest.fixture
def llama3(tmp_path: Path) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA3_8B))
    return tmp_path


def test_llama3_8b_takes_128_kib_per_token_in_bf16(llama3: Path) -> None:
    result = CliRunner().invoke(engine_app, ["plan", str(llama3), "--memory", "8GiB"])
    assert result.exit_code == 0, result.output
    assert "128 KiB" in result.output
    # No weights in the folder: all 8 GiB hold KV: 65,536 tokens, 4,096 blocks, 8 sequences of 8k.
    assert "65,536" in result.output and "4,096" in result.output
    assert "sequences of 8,192 tokens" in result.output


def test_plan_subtracts_the_weights_read_from_safetensors_headers(llama3: Path) -> None:
    header = json.dumps({"w": {"dtype": "BF16", "shape": [1024, 1024], "data_offsets": [0, 0]}})
    data = header.encode()
    (llama3 / "model.safetensors").write_bytes(struct.pack("<Q", len(data)) + data)
    config = read_config(llama3)
    plan = plan_memory(config, 2 * 1024 * 1024, parse_size("8GiB"), "bf16", 16, 4096)
    assert plan.kv_bytes_per_token == 131072
    assert plan.num_blocks == (8 * 2**30 - 2 * 2**20) // (16 * 131072)
    assert plan.concurrent_sequences == plan.num_blocks // 256
    result = CliRunner().invoke(engine_app, ["plan", str(llama3), "--max-len", "4096"])
    assert "1,048,576 parameters" in result.output and "2 MiB" in result.output


def test_f32_doubles_the_bytes_per_token(llama3: Path) -> None:
    plan = plan_memory(read_config(llama3), 0, parse_size("1GiB"), "f32")
    assert format_bytes(plan.kv_bytes_per_token) == "256 KiB"


def test_bad_input_is_a_one_line_user_error(llama3: Path) -> None:
    for args in (["--memory", "lots"], ["--dtype", "int3"], ["--memory", "1MiB"]):
        result = CliRunner().invoke(engine_app, ["plan", str(llama3), *args])
        assert isinstance(result.exception, UserError), args
        assert "\n" not in result.exception.message


def test_the_bundled_model_plan_counts_its_parameters() -> None:
    from backends.gguf.default_model import default_model_path

    try:
        path = default_model_path()
    except UserError:
        pytest.skip("the bundled model is not installed")
    result = CliRunner().invoke(engine_app, ["plan", "--memory", "2GiB", "--dtype", "f32"])
    assert result.exit_code == 0, result.output
    assert "45 KiB" in result.output  # 2 * 30 layers * 3 KV heads * 64 * 4 bytes = 46,080 B
    assert path.name in result.output


def test_sizes_read_binary_and_decimal_units() -> None:
    assert parse_size("8GiB") == parse_size("8G") == 8 << 30
    assert parse_size("1.5GB") == 1_500_000_000
    assert parse_size("512 MiB") == 512 << 20
    assert parse_size("4096") == 4096
    with pytest.raises(UserError, match="8GiB"):
        parse_size("eight gigs")
