"""A trace exported for training shows the model what it was shown at each step.

A run in the small-model profile (worked examples after the system prompt, tool selection,
the workspace's files as enums) through the real loop and trace writer, with a scripted model;
the trace is graded good and exported. The exported lines must be exactly the examples made
from the requests the backend really received (the same function the curriculum uses), not
the session's messages with the whole toolbox.
"""

from __future__ import annotations

import json
from pathlib import Path

from agent.messages import AssistantMessage, ToolCall
from agent.session import Session
from agent.trace import grade_trace, read_traces
from backends.fake import FakeBackend
from cli.config import load_settings
from cli.evals.generators.gold import run_example
from cli.trace_export import export
from cli.wiring import build_loop, run_traced, settings_toolbox


def test_an_exported_trace_is_the_requests_the_model_was_sent(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("a\nb\nc\n")
    settings = load_settings(
        {
            "workspace": str(ws),
            "data_dir": str(tmp_path / "data"),
            "backend": "fake",
            "profile": "small",
            "memory": {"enabled": False},
        }
    )
    turns = [
        AssistantMessage(tool_calls=[ToolCall.make("count_lines", {"path": "notes.txt"})]),
        AssistantMessage(tool_calls=[ToolCall.make("answer", {"text": "notes.txt has 3 lines"})]),
    ]
    backend = FakeBackend(turns)
    loop = build_loop(settings, backend, settings_toolbox(settings, None, None, backend))
    assert loop.examples and loop.select_tools is not None  # what the trace must not lose
    events = list(run_traced(settings, loop, Session(), "How many lines are in notes.txt?"))
    assert events and len(backend.requests) == 2
    [trace] = read_traces(settings.traces_dir)
    grade_trace(trace.path, "good")
    lines, summary = export(read_traces(settings.traces_dir), "good")
    assert summary.written == len(lines) >= 1
    sent = run_example(list(zip(backend.requests, turns, strict=True)))
    assert [json.loads(line) for line in lines] == sent
    shown = {t["function"]["name"] for t in sent[-1]["tools"]}
    assert "count_lines" in shown and len(shown) < len(loop.toolbox.specs())
