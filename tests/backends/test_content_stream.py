"""Streamed content stops where a tool call starts, however the text is split into pieces."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from agent.backend import Completion, TextDelta
from agent.messages import ChatRequest, UserMessage
from backends.base import DecodeResult, LocalBackend
from backends.local.chat_template import ChatTemplate
from backends.local.parsing import OPEN
from backends.local.tool_format import HERMES


def stream(pieces: list[str]) -> str:
    visible = HERMES.stream()
    return "".join(visible.feed(p) for p in pieces) + visible.flush()


def test_text_before_a_call_is_shown_and_the_call_is_not() -> None:
    assert stream(["Let me look.\n<tool", '_call>\n{"name": "shell"}', "\n</tool_call>"]) == (
        "Let me look.\n"
    )


def test_a_partial_tag_that_turns_out_to_be_text_is_released() -> None:
    visible = HERMES.stream()
    assert visible.feed("a <tool") == "a "
    assert visible.feed("box> b") == "<toolbox> b"
    assert visible.feed(" <") == " "
    assert visible.flush() == "<"


def test_plain_answers_pass_through_unchanged() -> None:
    assert stream(["The answer ", "is 42."]) == "The answer is 42."


@given(
    before=st.text(alphabet="ab<>_/tolc \n", max_size=30),
    after=st.text(alphabet="ab<>_/tolc{}\n", max_size=30),
    with_call=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=8),
)
def test_any_split_shows_exactly_the_text_before_the_first_tag(
    before: str, after: str, with_call: bool, cuts: list[int]
) -> None:
    text = before + (OPEN + after if with_call else "")
    bounds = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    head, tag, _ = text.partition(OPEN)
    assert stream(pieces) == (head if tag else text)


class ScriptedDecoder:
    """A decoder that replays fixed pieces: this test is about the backend's streaming only."""

    def __init__(self, pieces: list[str]) -> None:
        self.pieces = pieces

    def decode(self, prompt, request, stop, tools):  # type: ignore[no-untyped-def]
        yield from self.pieces
        yield DecodeResult()


def test_a_local_backend_streams_content_and_returns_the_parsed_call() -> None:
    pieces = [
        "Checking.",
        "\n<tool_",
        'call>\n{"name": "shell", "arguments": ',
        '{"command": "ls"}}',
        "\n</tool_call>",
    ]
    template = ChatTemplate("{{ messages[0]['content'] }}", "", "")
    backend = LocalBackend("scripted", template, ScriptedDecoder(pieces))
    events = list(backend.generate(ChatRequest(messages=[UserMessage(content="hi")])))
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    done = events[-1]
    assert shown == "Checking.\n"
    assert isinstance(done, Completion) and done.finish_reason == "tool_calls"
    [call] = done.message.tool_calls or []
    assert call.function.name == "shell" and call.function.parsed_arguments() == {"command": "ls"}


class RecordingDecoder:
    """Records what the backend hands the decoder: the test is about which tools go where."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.tools: list[list[str]] = []

    def decode(self, prompt, request, stop, tools):  # type: ignore[no-untyped-def]
        self.prompts.append(prompt)
        self.tools.append([t.function.name for t in tools or []])
        yield "done"
        yield DecodeResult()


def test_tools_held_back_are_shown_in_the_prompt_but_not_callable() -> None:
    from agent.messages import FunctionSpec, ToolSpec

    specs = [ToolSpec(function=FunctionSpec(name=n, description=n)) for n in ("look", "answer")]
    decoder = RecordingDecoder()
    backend = LocalBackend("recording", ChatTemplate(None, "", ""), decoder)
    messages = [UserMessage(content="hi")]
    for allowed in (["look"], None, ["answer"]):
        request = ChatRequest(messages=messages, tools=specs, allowed_tools=allowed)
        list(backend.generate(request))
    assert decoder.tools == [["look"], ["look", "answer"], ["answer"]]
    assert len(set(decoder.prompts)) == 1 and '"answer"' in decoder.prompts[0]
    wire = ChatRequest(messages=messages, tools=specs, allowed_tools=["answer"]).to_wire()
    assert [t["function"]["name"] for t in wire["tools"]] == ["answer"]
    assert "allowed_tools" not in wire
