"""One oversized tool result cannot push a request past the context: it is cut in the request,
kept as it was in the session (agent/fit.py), through the real loop and session files with the
scripted fake backend."""

from __future__ import annotations

from pathlib import Path

from agent.compaction import CompactionPolicy, Compactor
from agent.events import FinalEvent
from agent.fit import fit_results
from agent.loop import AgentLoop
from agent.messages import (
    AssistantMessage,
    ChatRequest,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agent.session import Session
from agent.tools import Toolbox, function_tool
from backends.fake import FakeBackend

BIG = "".join(f"line {i}: the quick brown fox\n" for i in range(2000))  # about 58,000 chars


def read_log(path: str) -> str:
    """Read a log file."""
    return BIG


def _results(request: ChatRequest) -> list[str]:
    return [m.content for m in request.messages if isinstance(m, ToolMessage)]


def test_results_are_cut_to_one_level_longest_first() -> None:
    lengths = [100, 5_000, 20_000]
    messages = [UserMessage(content="go")] + [
        ToolMessage(tool_call_id=f"c{i}", content="x" * n) for i, n in enumerate(lengths)
    ]
    fitted, cut = fit_results(ChatRequest(messages=messages), 3_000)
    sizes = [len(r) for r in _results(fitted)]
    assert cut == 2 and sizes[0] == 100 and abs(sizes[1] - sizes[2]) <= 2
    assert sum(sizes) <= 3_000
    assert "characters cut here" in _results(fitted)[2]
    same, none = fit_results(ChatRequest(messages=messages), 30_000)
    assert none == 0 and same.messages == messages


def test_a_huge_result_is_cut_in_the_request_and_kept_in_the_session(tmp_path: Path) -> None:
    call = AssistantMessage(tool_calls=[ToolCall.make("read_log", {"path": "app.log"})])
    backend = FakeBackend([call, AssistantMessage(content="the log has 2000 lines")])
    compactor = Compactor(CompactionPolicy(budget_tokens=1_500))
    # The fake backend counts words as tokens, a rate no tokenizer has: keep the first estimate.
    compactor.observe = lambda _request, _tokens: None  # type: ignore[method-assign]
    loop = AgentLoop(backend, Toolbox([function_tool(read_log)]), compactor=compactor)
    session = Session(tmp_path / "s.jsonl")
    events = list(loop.run(session, "what is in app.log?"))
    assert any(isinstance(e, FinalEvent) for e in events)
    sent = backend.requests[1]
    (result,) = _results(sent)
    # The loop already bounds one result (16,000 characters); the fit cuts it further.
    assert "characters cut here" in result and len(result) < 6_000
    assert result.startswith("line 0:")
    assert result.rstrip().endswith("line 1999: the quick brown fox")
    assert compactor.estimate(sent) <= 1_500
    kept = [m for m in Session.open(tmp_path / "s.jsonl").messages if isinstance(m, ToolMessage)]
    assert kept[0].content.startswith("line 0:") and len(kept[0].content) > 2 * len(result)
