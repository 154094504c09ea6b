"""The adapter clawloop ships for the bundled model: a real LoRA of that model, small enough to
ship, on by default in both local backends for the bundled model only, and off with "none"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.messages import ChatRequest, UserMessage
from backends.gguf.default_model import SHIPPED_ADAPTER, default_adapter, default_model_path
from backends.gguf.lora import adapter_path, read_adapter
from backends.training.trainer import file_sha256

pytest.importorskip("llama_cpp")
MANIFEST = SHIPPED_ADAPTER.with_suffix(".json")


def test_the_shipped_adapter_is_a_small_lora_of_the_bundled_model() -> None:
    assert SHIPPED_ADAPTER.stat().st_size <= 20 * 1024 * 1024
    adapter = read_adapter(SHIPPED_ADAPTER)
    assert "blk.29.ffn_down.weight" in adapter.pairs  # all 30 layers of the 135M model
    manifest = json.loads(MANIFEST.read_text())
    assert manifest["base_model"]["sha256"] == file_sha256(default_model_path())
    assert manifest["settings"]["rank"] == adapter.rank


def test_it_is_the_default_for_the_bundled_model_only(tmp_path: Path) -> None:
    assert default_adapter(default_model_path()) == SHIPPED_ADAPTER
    other = tmp_path / "other.gguf"
    other.write_bytes(default_model_path().read_bytes()[:1024])
    assert default_adapter(other) is None
    assert adapter_path(None, SHIPPED_ADAPTER) == SHIPPED_ADAPTER
    assert adapter_path("none", SHIPPED_ADAPTER) is None


def test_llamacpp_runs_it_by_default_and_none_turns_it_off() -> None:
    from backends.llamacpp.backend import LlamaCppOptions, make_llamacpp_backend

    request = ChatRequest(
        messages=[UserMessage(content="Name three colours.")], temperature=0, max_tokens=24
    )
    shipped = make_llamacpp_backend(options=LlamaCppOptions(threads=1))
    plain = make_llamacpp_backend(options=LlamaCppOptions(threads=1), adapter="none")
    assert shipped.adapter == SHIPPED_ADAPTER and plain.adapter is None
    said = [list(b.generate(request))[-1].message.content for b in (shipped, plain)]
    assert said[0] != said[1]  # the adapter is applied, not only named
