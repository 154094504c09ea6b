"""`agent serve` picks its model file as `agent run -b engine` does (the flag, the config's
model when the engine is the configured backend, the engine table's), read from a real config
file and environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.config import Settings, load_settings
from cli.serve_cmd import served_model


def _settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Settings:
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    monkeypatch.setenv("CLAWLOOP_CONFIG", str(config))
    monkeypatch.delenv("CLAWLOOP_MODEL", raising=False)
    monkeypatch.delenv("CLAWLOOP_BACKEND", raising=False)
    return load_settings()


def test_the_top_level_model_is_served_when_the_engine_is_the_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = 'backend = "engine"\nmodel = "/m/top.gguf"\n[backends.engine]\nmodel = "/m/table.gguf"\n'
    settings = _settings(tmp_path, monkeypatch, text)
    assert served_model(None, settings) == "/m/top.gguf"
    assert served_model("/m/flag.gguf", settings) == "/m/flag.gguf"
    monkeypatch.setenv("CLAWLOOP_MODEL", "/m/env.gguf")
    assert served_model(None, load_settings()) == "/m/env.gguf"


def test_another_backends_model_name_is_not_taken_for_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = 'backend = "openai"\nmodel = "gpt-4o-mini"\n[backends.engine]\nmodel = "/m/table.gguf"\n'
    settings = _settings(tmp_path, monkeypatch, text)
    assert served_model(None, settings) == "/m/table.gguf"
    bare = _settings(tmp_path, monkeypatch, 'backend = "openai"\nmodel = "gpt-4o-mini"\n')
    assert served_model(None, bare) is None  # the bundled model
