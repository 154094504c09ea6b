"""A long session sees memory as it is now: every request's system prompt carries the current
memory block, while the session keeps the prompt it stored (and its compaction summary).

Through the real loop as `agent` wires it, with memory on, a scripted backend and the real
memory files: a fact remembered after the session began (by another chat, or `agent memory`)
is in the next request of that session, and a forgotten one is gone from it.
"""

from __future__ import annotations

from pathlib import Path

from agent.messages import AssistantMessage, SystemMessage
from agent.run_context import RunContext
from agent.session import SUMMARY_HEADING, Session
from backends.fake import FakeBackend
from cli.config import load_settings
from cli.wiring import build_loop, settings_toolbox
from skills.memory.recall import PROMPT_CLOSE, PROMPT_OPEN, with_block
from skills.memory.store import MemoryStore
from skills.memory.tools import memory_folder

FACT = "the user's cat is called Pixel"


def test_the_block_is_replaced_in_place_and_the_summary_after_it_stays() -> None:
    old = f"{PROMPT_OPEN}\n- old fact\n{PROMPT_CLOSE}"
    new = f"{PROMPT_OPEN}\n- new fact\n{PROMPT_CLOSE}"
    summary = f"{SUMMARY_HEADING}\n- the user asked for a.txt"
    assert with_block(f"Be brief.\n\n{old}\n\n{summary}", new) == f"Be brief.\n\n{new}\n\n{summary}"
    assert with_block(f"Be brief.\n\n{summary}", new) == f"Be brief.\n\n{new}\n\n{summary}"
    assert with_block(f"Be brief.\n\n{old}\n\n{summary}", "") == f"Be brief.\n\n{summary}"
    assert with_block("Be brief.", new) == f"Be brief.\n\n{new}"
    assert with_block("Be brief.", "") == "Be brief."


def test_a_long_session_is_sent_the_memory_as_it_is_now(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    settings = load_settings(
        {"workspace": str(tmp_path / "ws"), "data_dir": str(tmp_path / "data"), "backend": "fake"}
    )
    backend = FakeBackend([AssistantMessage(content=f"ok {i}") for i in range(3)])
    loop = build_loop(settings, backend, settings_toolbox(settings, None, None, backend))
    session = Session(tmp_path / "chat.jsonl")
    store = MemoryStore(memory_folder(settings.data_dir, settings.memory))

    def turn(text: str) -> str:
        list(loop.run(session, text, RunContext()))
        system = backend.requests[-1].messages[0]
        assert isinstance(system, SystemMessage)
        return system.content

    assert FACT not in turn("hi")
    entry = store.add(FACT)  # remembered elsewhere after this session began
    assert FACT in turn("and now?")
    store.forget([entry])
    assert FACT not in turn("and now?")
    # What the session stored is the prompt it started with, read back from disk too.
    for stored in (session.messages[0], Session.open(tmp_path / "chat.jsonl").messages[0]):
        assert isinstance(stored, SystemMessage) and FACT not in stored.content
