"""Full-text search over past sessions: real session files, a real SQLite FTS5 index, updated
as sessions grow, are rewritten or go away; untrusted results come back with their label."""

from __future__ import annotations

import json
from pathlib import Path

from agent.messages import AssistantMessage, SystemMessage, ToolCall, ToolMessage, UserMessage
from agent.provenance import Provenance
from agent.session import Session
from sandbox.settings import SandboxSettings
from skills.context import Places, SkillContext
from skills.memory.config import MemorySettings
from skills.memory.session_index import AFTER_UNTRUSTED, SessionIndex
from skills.memory.tools import make_memory_tools


def write_session(folder: Path, name: str) -> Session:
    session = Session.open(folder / f"{name}.jsonl")
    session.append(SystemMessage(content="You are a helpful agent with a kumquat in the prompt."))
    session.append(UserMessage(content="Plan the trip to Lisbon in April"))
    call = ToolCall.make("mail_read", {"id": "INBOX:4"})
    session.append(AssistantMessage(tool_calls=[call]))
    session.append(
        ToolMessage(
            tool_call_id=call.id,
            name="mail_read",
            content="Your flight to Lisbon leaves from gate B12",
            provenance=Provenance.mail("airline@example.org"),
        )
    )
    session.append(AssistantMessage(content="Your Lisbon flight leaves from gate B12."))
    return session


def test_search_finds_a_word_from_an_earlier_session_and_labels_untrusted_hits(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / "sessions"
    write_session(sessions, "trip")
    index = SessionIndex(tmp_path / "index.sqlite3", sessions)
    assert index.update() == 4  # the system prompt is not indexed
    hits = index.search("lisbon april")
    assert [(h.session, h.role, h.label) for h in hits] == [("trip", "user", "")]
    assert "[Lisbon]" in hits[0].excerpt and "[April]" in hits[0].excerpt
    by_role = {h.role: h for h in index.search("gate")}
    assert by_role["tool"].label == "a mail from airline@example.org"
    assert by_role["assistant"].label == AFTER_UNTRUSTED
    assert index.search("kumquat") == []
    # Words the index stems alike are found alike ("flights" finds "flight").
    assert index.search("flights")
    assert index.update() == 0  # nothing new


def test_the_index_follows_a_session_as_it_grows_is_rewritten_and_goes_away(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / "sessions"
    session = write_session(sessions, "trip")
    index = SessionIndex(tmp_path / "index.sqlite3", sessions)
    index.update()
    assert index.search("pastel") == []
    session.append(UserMessage(content="Which pastel de nata place was it?"))
    with (sessions / "trip.jsonl").open("a") as fh:  # records that are not messages are skipped
        fh.write(json.dumps({"compaction": {"summary": "a trip to Lisbon"}}) + "\n")
        fh.write('{"role": "user", "content": "cut sh')  # a line still being written
    assert index.update() == 1
    hits = index.search("pastel")
    assert len(hits) == 1 and hits[0].seq == 6
    # A rewritten file (shorter than what was indexed) is indexed again from the start.
    (sessions / "trip.jsonl").write_text(
        json.dumps(UserMessage(content="only the harbour now").to_record()) + "\n"
    )
    assert index.update() == 1
    assert index.search("lisbon") == [] and len(index.search("harbour")) == 1
    (sessions / "trip.jsonl").unlink()
    index.update()
    assert index.search("harbour") == []


def test_the_search_sessions_tool_fences_untrusted_hits(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_session(data / "sessions", "trip")
    ws = tmp_path / "ws"
    ws.mkdir()
    context = SkillContext.create(
        ws,
        SandboxSettings(backend="off"),
        places=Places(data_dir=data),
        environ={},
        options={"memory": MemorySettings()},
    )
    tools = {t.name: t for t in make_memory_tools(context)}
    result = tools["search_sessions"].call({"query": "gate"})
    text = result.render()
    assert "trip #4 (tool) [a mail from airline@example.org]:" in text
    assert "<untrusted-content>" in text
    assert result.provenance is not None and not result.provenance.trusted
    plain = tools["search_sessions"].call({"query": "april"})
    assert "<untrusted-content>" not in plain.render() and plain.provenance is None
    assert "no past session mentions" in tools["search_sessions"].call({"query": "zzz"}).render()
    off = SkillContext.create(
        ws, SandboxSettings(backend="off"), places=Places(data_dir=data), environ={}, options={}
    )
    assert make_memory_tools(off) == []  # no [memory] settings given: no tools
