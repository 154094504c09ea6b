"""The bundled model says back a fact from an earlier conversation: memory at work end to end.

The real bundled model (llama.cpp, small-model profile, shipped adapter), the real memory
skill and files. The fact is told in one session and asked for in fresh ones, so nothing but
memory carries it: the model's reply itself must hold it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.events import FinalEvent
from agent.session import Session
from cli.approvals import AutoApprover
from cli.config import load_settings
from cli.wiring import build_backend, build_loop, run_traced, settings_toolbox
from skills.memory.store import MemoryStore

pytest.importorskip("llama_cpp", reason="the bundled model's backend (installed by the README)")


@pytest.mark.slow
@pytest.mark.timeout(600)  # six short runs of the 135M model: under a minute on an idle core
def test_a_fact_told_once_is_said_back_in_later_conversations(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    settings = load_settings(
        {
            "workspace": str(tmp_path / "ws"),
            "data_dir": str(tmp_path / "data"),
            "max_steps": 6,
            "backends": {"llamacpp": {"threads": 1}},
        }
    )
    assert settings.small_model
    backend = build_backend(settings)

    def say(text: str) -> str:
        loop = build_loop(settings, backend, settings_toolbox(settings, AutoApprover()))
        finals = [
            e for e in run_traced(settings, loop, Session(), text) if isinstance(e, FinalEvent)
        ]
        assert finals, f"no answer to {text!r}"
        return finals[-1].content

    say("My name is Zorblat and my cat is called Pixel.")
    kept = [e.text for e in MemoryStore(settings.data_dir / "memory").entries()]
    assert any("Zorblat" in t and "Pixel" in t for t in kept), kept
    assert "Zorblat" in say("What is my name?")
    assert "Pixel" in say("What is my cat called?")
