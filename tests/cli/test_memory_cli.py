"""Memory end to end: `agent run` remembers through the real CLI, `agent memory show/forget`
and `agent sessions search` read what it left, and the system prompt carries memory within its
bound, the same bytes from turn to turn while memory does not change."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from agent.messages import ChatRequest
from agent.session import Session
from agent.tools import Toolbox
from backends.fake import FakeBackend
from cli.config import load_settings
from cli.wiring import build_loop, run_traced
from skills.memory.recall import PROMPT_OPEN
from skills.memory.store import MemoryStore
from tests.cli.test_run import agent, script

REMEMBER = [
    {
        "tool_calls": [
            {
                "name": "remember",
                "arguments": {"text": "the user's cat is called Pixel", "kind": "fact"},
            }
        ]
    },
    "I will remember that Pixel is your cat.",
]


def test_remember_then_show_search_and_forget_through_the_cli(
    tmp_path: Path, ws: Path, isolated_home: Path
) -> None:
    out = agent(
        "run",
        "Remember that my cat is called Pixel",
        "--script",
        str(script(tmp_path, REMEMBER)),
        "--session",
        "pets",
        "--json",
        cwd=ws,
    )
    assert out.returncode == 0, out.stderr
    results = [e for e in map(json.loads, out.stdout.splitlines()) if e["type"] == "tool_result"]
    assert results[0]["ok"], results[0]["content"]
    today = dt.date.today().isoformat()

    shown = agent("memory", "show", cwd=ws)
    assert shown.returncode == 0, shown.stderr
    assert "== MEMORY.md" in shown.stdout
    assert f"- {today}: the user's cat is called Pixel" in shown.stdout

    found = agent("sessions", "search", "pixel", cwd=ws)
    assert found.returncode == 0, found.stderr
    assert "pets #2 user" in found.stdout and "Pixel" in found.stdout
    assert agent("sessions", "search", "hamster", cwd=ws).returncode == 1

    forgot = agent("memory", "forget", "Pixel", cwd=ws)
    assert forgot.returncode == 0, forgot.stderr
    assert f"forgot from MEMORY.md: - {today}: the user's cat is called Pixel" in forgot.stdout
    assert "Pixel" not in agent("memory", "show", "facts", cwd=ws).stdout
    memory = isolated_home / "data" / "memory"
    assert "Pixel" in (memory / ".history").read_text()
    again = agent("memory", "forget", "Pixel", cwd=ws)
    assert again.returncode == 2 and "nothing remembered contains" in again.stderr
    outside = agent("memory", "show", "../sessions/pets.jsonl", cwd=ws)
    assert outside.returncode == 2 and "is not a memory file" in outside.stderr


def test_memory_edit_opens_the_editor_on_the_file(tmp_path: Path, ws: Path) -> None:
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\necho "- 2026-01-02: prefers short answers" >> "$1"\n')
    editor.chmod(0o755)
    out = agent("memory", "edit", "profile", cwd=ws, env_extra={"EDITOR": str(editor)})
    assert out.returncode == 0, out.stderr
    assert "prefers short answers" in agent("memory", "show", "profile", cwd=ws).stdout


def prompts(backend: FakeBackend) -> list[str]:
    def first(request: ChatRequest) -> str:
        content = request.messages[0].content
        return content if isinstance(content, str) else ""

    return [first(r) for r in backend.requests]


def test_the_system_prompt_carries_memory_within_its_bound_and_stays_the_same_between_turns(
    tmp_path: Path, ws: Path
) -> None:
    settings = load_settings({"memory.prompt_chars": 400, "backend": "fake", "workspace": ws})
    memory = MemoryStore(settings.data_dir / "memory")
    memory.add("The user's name is Ana", "profile")
    for i in range(40):
        memory.add(f"fact {i:02d} about the user's garden")
    backend = FakeBackend(when_done="ok")
    loop = build_loop(settings, backend, Toolbox())
    session = Session.open(settings.sessions_dir / "garden.jsonl")
    list(run_traced(settings, loop, session, "hello"))
    list(run_traced(settings, loop, session, "and again"))
    first, second = prompts(backend)
    assert first == second  # byte for byte: the cached prefix holds
    block = first[first.index(PROMPT_OPEN) :]
    assert len(block) <= 400
    assert "The user's name is Ana" in block and "fact 39" in block and "fact 00" not in block

    # Memory changes: the running session and a new one both get the new memory, in place of
    # the old block (what comes before it is unchanged, so only the block is prefilled again).
    memory.add("the user planted tulips")
    list(run_traced(settings, loop, session, "one more"))
    list(run_traced(settings, loop, Session(), "a new conversation"))
    for changed in prompts(backend)[2:4]:
        assert "tulips" in changed and changed.count(PROMPT_OPEN) == 1
        assert changed[: first.index(PROMPT_OPEN)] == first[: first.index(PROMPT_OPEN)]

    off = load_settings({"memory.enabled": False, "backend": "fake", "workspace": ws})
    quiet = FakeBackend(when_done="ok")
    list(run_traced(off, build_loop(off, quiet, Toolbox()), Session(), "hi"))
    assert PROMPT_OPEN not in prompts(quiet)[0]
