"""Built-in backends register through the plugin hook, and their factories take options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.backend import Completion
from agent.errors import ConfigError, UserError
from agent.messages import ChatRequest, UserMessage
from agent.plugins import collect, plugin_manager
from backends import builtin
from backends.fake import FakeBackend
from backends.openai_compat import OpenAICompatBackend


def registered() -> dict:
    pm = plugin_manager(load_entry_points=False)
    pm.register(builtin)
    return collect(pm, "register_backends")


def test_all_builtins_are_registered():
    assert set(registered()) == {"fake", "llamacpp", "openai", "engine"}


def test_fake_from_a_script(tmp_path: Path):
    script = tmp_path / "turns.json"
    script.write_text(json.dumps(["scripted answer"]))
    backend = registered()["fake"](script=str(script), unknown_option=1)
    assert isinstance(backend, FakeBackend)
    events = list(backend.generate(ChatRequest(messages=[UserMessage(content="q")])))
    assert isinstance(events[-1], Completion)
    assert events[-1].message.content == "scripted answer"
    assert isinstance(registered()["fake"](), FakeBackend)


def test_openai_options(monkeypatch: pytest.MonkeyPatch):
    backend = registered()["openai"](base_url="http://127.0.0.1:9/v1/", model="m", timeout="5")
    assert isinstance(backend, OpenAICompatBackend)
    assert (backend.url, backend.model, backend.timeout) == (
        "http://127.0.0.1:9/v1/chat/completions",
        "m",
        5.0,
    )


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="n_ctx must be a whole number"):
        registered()["llamacpp"](n_ctx="lots")
    with pytest.raises(ConfigError, match="tool_first must be true or false"):
        registered()["llamacpp"](tool_first="maybe")
    with pytest.raises(ConfigError, match="timeout must be a number"):
        registered()["openai"](timeout="soon")


def test_llamacpp_missing_model_file(tmp_path: Path):
    pytest.importorskip("llama_cpp")
    with pytest.raises(UserError, match="does not exist"):
        registered()["llamacpp"](model=str(tmp_path / "none.gguf"), n_ctx="512")
