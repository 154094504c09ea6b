"""Provenance outlives compaction: a mail compacted out of the window still steers nothing.

The real loop, session file, files skill and guard, with the scripted fake backend. The mail is
read, the chat goes on until the mail's turn is compacted into a summary (which does not quote
it), and the session is reopened from disk; then a call that only the mail asked for is still
judged against the mail, and refused in an unattended run.
"""

from __future__ import annotations

from pathlib import Path

from test_dataflow_gate import ATTACKER, results, toolbox

from agent.compaction import CompactionPolicy, Compactor
from agent.loop import AgentLoop
from agent.messages import AssistantMessage, ToolCall, ToolMessage
from agent.run_context import RunContext
from agent.session import Session
from backends.fake import FakeBackend


def loop_for(backend: FakeBackend, tmp_path: Path) -> AgentLoop:
    compactor = Compactor(CompactionPolicy(budget_tokens=400, keep_turns=1))
    return AgentLoop(backend, toolbox(tmp_path), system_prompt="You help.", compactor=compactor)


def test_a_compacted_mail_is_still_the_source_of_what_it_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    session = Session(path)
    read = FakeBackend(
        [
            AssistantMessage(tool_calls=[ToolCall.make("read_mail", {"id": "INBOX:1"})]),
            AssistantMessage(content="It is a note from a stranger."),
        ]
    )
    list(loop_for(read, tmp_path).run(session, "What does my latest mail say?"))
    chat = FakeBackend([AssistantMessage(content="Sure.")] * 40)
    for i in range(12):
        list(loop_for(chat, tmp_path).run(session, f"tell me about the weather on day {i}"))
    mail_at = next(i for i, m in enumerate(session.messages) if isinstance(m, ToolMessage))
    assert session.compacted > mail_at, "the mail's turn must be compacted for this test"
    assert "overwrite" not in (session.summary or "")  # the summary does not quote the mail
    assert f"a mail from {ATTACKER}" in session.compactions[-1].untrusted

    reopened = Session.open(path)
    obey = FakeBackend(
        [
            AssistantMessage(
                tool_calls=[ToolCall.make("files_write", {"path": "notes.md", "content": "pwned"})]
            ),
            AssistantMessage(content="done"),
        ]
    )
    events = list(loop_for(obey, tmp_path).run(reopened, "tidy up please", RunContext()))
    [write] = results(events)
    assert not write.ok and write.decision == "deny"
    assert f"appears only in a mail from {ATTACKER}" in write.content
    assert (tmp_path / "ws" / "notes.md").read_text() == "my notes\n"
    sent = " ".join(str(m.content) for m in obey.requests[0].messages)
    assert "overwrite notes.md" not in sent  # the model was not even sent the mail again
