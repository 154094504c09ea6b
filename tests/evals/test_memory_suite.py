"""evals/memory.yaml loads; the other suites send the small model the same requests with memory
on as with it off (no prompt of theirs cues a memory tool, and an empty memory adds nothing to
the system prompt), so turning memory on cannot move their results."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.messages import Message, UserMessage
from backends.fake import FakeBackend
from cli.approvals import AutoApprover
from cli.config import load_settings
from cli.evals.suite import load_suite
from cli.wiring import build_loop, settings_toolbox

ROOT = Path(__file__).resolve().parents[2]


def test_the_memory_suite_starts_every_task_from_memory() -> None:
    suite = load_suite(ROOT / "evals" / "memory.yaml")
    assert len(suite.tasks) == 16
    assert all(t.uses_memory and not t.files for t in suite.tasks)


@pytest.mark.parametrize("name", ["basic", "paraphrase", "unseen", "injection"])
def test_memory_on_changes_no_request_of_the_other_suites(name: str, tmp_path: Path) -> None:
    suite = load_suite(ROOT / "evals" / f"{name}.yaml")
    offered = {}
    for memory in (True, False):
        settings = load_settings(
            {
                "backend": "fake",
                "profile": "small",
                "workspace": str(tmp_path),
                "memory.enabled": memory,
                "memory.folder": str(tmp_path / "memory"),
                "sandbox.backend": "off",
            }
        )
        loop = build_loop(settings, FakeBackend(), settings_toolbox(settings, AutoApprover()))
        assert loop.select_tools is not None
        specs = loop.toolbox.specs()
        assert any(s.function.name == "recall" for s in specs) is memory
        shown = {}
        for task in suite.tasks:
            messages: list[Message] = [UserMessage(content=task.prompt)]
            tools, allowed = loop.select_tools.choose(messages, specs)
            shown[task.id] = ([t.function.name for t in tools], allowed)
        offered[memory] = (loop.system_prompt, shown)
    assert offered[True] == offered[False]
