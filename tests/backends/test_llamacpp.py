"""The llama.cpp backend on the bundled SmolLM2-135M model: decoding, grammar, and the loop.

Real-model tests run greedy (temperature 0) on one thread, so their output is reproducible.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.backend import BackendEvent, Completion, TextDelta
from agent.errors import UserError
from agent.events import FinalEvent, ToolCallEvent, ToolResultEvent
from agent.loop import AgentLoop, Decoding, LoopLimits
from agent.messages import (
    AssistantMessage,
    ChatRequest,
    Message,
    SystemMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from agent.session import Session
from agent.tools import Toolbox, function_tool
from agent.validation import check_call
from backends.base import LocalBackend
from backends.llamacpp.backend import LlamaCppDecoder, LlamaCppOptions
from backends.local.stop_text import StopStringMatcher, partial_suffix

pytest.importorskip("llama_cpp")


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalBackend]:
    from backends.gguf.default_model import default_model_path
    from backends.llamacpp.backend import make_llamacpp_backend

    try:
        default_model_path()
    except UserError as exc:
        pytest.skip(exc.message)
    yield make_llamacpp_backend(options=LlamaCppOptions(threads=1, n_ctx=2048))


def generate(backend: LocalBackend, request: ChatRequest) -> tuple[str, Completion]:
    events = list(backend.generate(request))
    done = events[-1]
    assert isinstance(done, Completion)
    return "".join(e.text for e in events if isinstance(e, TextDelta)), done


def greedy(messages: list[Message], **kwargs: object) -> ChatRequest:
    return ChatRequest(messages=messages, temperature=0.0, **kwargs)  # type: ignore[arg-type]


# --- pure parts -------------------------------------------------------------------------------


def test_stop_text_holds_back_possible_stops():
    stops = StopStringMatcher(["<|im_end|>", "STOP"])
    assert stops.feed("Hello <|im") == ("Hello ", False)
    assert stops.feed("_en") == ("", False)
    assert stops.feed("x and ST") == ("<|im_enx and ", False)
    assert stops.feed("OP more") == ("", True)
    assert stops.stopped and stops.flush() == ""
    assert partial_suffix("abcST", "STOP") == 2 and partial_suffix("abc", "STOP") == 0


def test_tool_first_requires_a_call_only_to_start_a_turn(tmp_path: Path):
    decoder = LlamaCppDecoder(tmp_path / "m.gguf", LlamaCppOptions(n_ctx=512, tool_first=True))
    asked: list[Message] = [UserMessage(content="q")]
    answered: list[Message] = [*asked, AssistantMessage(content="a")]
    assert decoder._required(ChatRequest(messages=asked))
    assert not decoder._required(ChatRequest(messages=[*answered, _tool_result()]))
    assert not decoder._required(ChatRequest(messages=asked, tool_choice="auto"))
    plain = LlamaCppDecoder(tmp_path / "m.gguf", LlamaCppOptions(n_ctx=512))
    assert not plain._required(ChatRequest(messages=asked))
    assert plain._required(ChatRequest(messages=asked, tool_choice="required"))


def _tool_result() -> Message:
    from agent.messages import ToolMessage

    return ToolMessage(tool_call_id="c", content="r")


def test_extra_buffers_can_be_forced(monkeypatch: pytest.MonkeyPatch):
    from backends.llamacpp.backend import default_extra_buffers

    monkeypatch.setenv("CLAWLOOP_LLAMACPP_EXTRA_BUFFERS", "1")
    assert default_extra_buffers() is True
    monkeypatch.setenv("CLAWLOOP_LLAMACPP_EXTRA_BUFFERS", "off")
    assert default_extra_buffers() is False
    monkeypatch.delenv("CLAWLOOP_LLAMACPP_EXTRA_BUFFERS")
    cpu_flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    assert default_extra_buffers() is ("amx_tile" not in cpu_flags)


def test_unknown_model_path(tmp_path: Path):
    from backends.llamacpp.backend import make_llamacpp_backend

    with pytest.raises(UserError, match="does not exist"):
        make_llamacpp_backend(model=tmp_path / "missing.gguf")


# --- the real model -----------------------------------------------------------------------------


@pytest.mark.slow
def test_plain_answer_matches_llama_cpp_itself(backend: LocalBackend):
    messages: list[Message] = [
        SystemMessage(content="You are a helpful assistant."),
        UserMessage(content="What is the capital of France?"),
    ]
    text, done = generate(backend, greedy(messages, max_tokens=24))
    # No fixed text: with 4-bit weights the first token is a near tie ("The" / "La") whose
    # winner depends on the CPU's kernels; what must hold is that we decode as llama.cpp does.
    assert text.strip()
    assert done.message.content == text and done.message.tool_calls is None
    assert done.finish_reason in {"stop", "length"}
    assert done.usage.prompt_tokens > 10 and 0 < done.usage.completion_tokens <= 24
    # llama-cpp-python's own completion API, same prompt, same greedy decoding.
    from backends.llamacpp.backend import load_llama

    decoder = backend.decoder
    assert isinstance(decoder, LlamaCppDecoder)
    llm = load_llama(
        decoder.model_path, decoder.n_ctx, decoder.threads, decoder.extra_buffers, decoder.adapter
    ).llm
    llm.reset()
    prompt = backend.template.render(messages)
    reference = llm.create_completion(prompt, max_tokens=24, temperature=0.0)
    assert reference["choices"][0]["text"] == text


@pytest.mark.slow
def test_max_tokens_stop_strings_and_prefix_reuse(backend: LocalBackend):
    question: list[Message] = [UserMessage(content="Write a long story about a dragon.")]
    _, first = generate(backend, greedy(question, max_tokens=6))
    assert first.finish_reason == "length" and first.usage.completion_tokens == 6
    text, done = generate(backend, greedy(question, max_tokens=40, stop=[" the"]))
    assert done.finish_reason == "stop" and " the" not in text
    # The same prompt again: all but its last token come from the KV cache.
    assert done.usage.cached_tokens == done.usage.prompt_tokens - 1
    follow_up: list[Message] = [
        *question,
        AssistantMessage(content=text),
        UserMessage(content="Shorter."),
    ]
    _, again = generate(backend, greedy(follow_up, max_tokens=4))
    assert again.usage.cached_tokens >= done.usage.prompt_tokens - 1


@pytest.mark.slow
def test_seeded_sampling_is_reproducible(backend: LocalBackend):
    request = ChatRequest(
        messages=[UserMessage(content="Name a colour.")], temperature=1.0, seed=7, max_tokens=12
    )
    assert generate(backend, request)[0] == generate(backend, request)[0]


@pytest.mark.slow
def test_required_tool_choice_gives_a_schema_valid_call(
    backend: LocalBackend, tools: list[ToolSpec]
):
    def weather(city: str) -> str:
        """The weather in a city."""
        return city

    def read(path: str, limit: int = 100) -> str:
        """Read a text file."""
        return path

    toolbox = Toolbox([function_tool(weather), function_tool(read)])
    for task in ("Read the file notes.txt",):
        request = greedy(
            [UserMessage(content=task)],
            tools=toolbox.specs(),
            tool_choice="required",
            max_tokens=60,
        )
        text, done = generate(backend, request)
        # A call from the first token: nothing is content, so nothing streams as text.
        assert text == "" and not done.message.content, text
        assert done.finish_reason == "tool_calls"
        [call] = done.message.tool_calls or []
        args, problem = check_call(call, toolbox)
        assert problem is None and args is not None, problem


@pytest.mark.slow
def test_lazy_grammar_constrains_a_call_once_started(backend: LocalBackend, tools: list[ToolSpec]):
    """Free text until "<tool_call>"; from there on only a valid call, then the end."""
    request = greedy([UserMessage(content="Print <tool_call> five times.")], max_tokens=60)
    prompt = backend.template.render(request.messages, tools[:1])
    stop = backend.template.stop_strings

    def decode(offered: list[ToolSpec] | None) -> str:
        return "".join(
            p for p in backend.decoder.decode(prompt, request, stop, offered) if isinstance(p, str)
        )

    free = decode(None)
    constrained = decode(tools[:1])
    assert free.startswith("<tool_call>") and constrained.startswith("<tool_call>")
    # Unconstrained, this model writes something that is not a call to the weather tool ...
    body = free.removeprefix("<tool_call>").split("</tool_call>")[0]
    try:
        free_ok = json.loads(body).get("name") == "weather"
    except json.JSONDecodeError:
        free_ok = False
    assert not free_ok, free
    # ... with the grammar, exactly one well-formed call to it, and nothing after.
    assert constrained.endswith("</tool_call>")
    call = json.loads(constrained.removeprefix("<tool_call>").removesuffix("</tool_call>"))
    assert call["name"] == "weather" and isinstance(call["arguments"].get("city"), str)
    assert set(call["arguments"]) == {"city"}


@pytest.mark.slow
def test_agent_loop_runs_a_real_tool_call_and_answers(tmp_path: Path):
    """The model calls a real tool under the grammar, reads its result and answers with it."""
    from backends.llamacpp.backend import make_llamacpp_backend

    reports = {"Paris": "sunny, 21 C", "Oslo": "rain, 9 C"}
    executed: list[str] = []

    def weather(city: str) -> str:
        """Get the current weather in a city."""
        executed.append(city)
        return reports.get(city, f"no weather report for {city}")

    # The bare model: this loop's tools have no answer tool, and the shipped adapter is trained
    # on the small-model profile's tools, where the answer is a call (test_shipped_adapter.py).
    backend = make_llamacpp_backend(
        options=LlamaCppOptions(threads=1, n_ctx=2048, tool_first=True), adapter="none"
    )
    usages: list[Usage] = []

    class Recording:
        name = "recording"

        def generate(self, request: ChatRequest) -> Iterator[BackendEvent]:
            for event in backend.generate(request):
                if isinstance(event, Completion):
                    usages.append(event.usage)
                yield event

    loop = AgentLoop(
        Recording(),
        Toolbox([function_tool(weather)]),
        system_prompt="You are a helpful assistant.",
        decoding=Decoding(temperature=0.0, max_tokens=60),
        limits=LoopLimits(max_steps=4),
    )
    session = Session(tmp_path / "session.jsonl")
    events = [e for e in loop.run(session, "What is the weather in Paris?") if e.type != "token"]
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    finals = [e for e in events if isinstance(e, FinalEvent)]
    assert calls and results and finals, events
    assert calls[0].call.function.name == "weather"
    assert json.loads(calls[0].call.function.arguments) == {"city": executed[0]}
    assert results[0].ok and results[0].content == reports.get(executed[0], results[0].content)
    assert executed == ["Paris"]
    # The answer uses what the tool returned.
    assert "sunny" in finals[0].content.lower() or "21" in finals[0].content
    # The second prompt starts with the first one, token for token: its KV cache is reused.
    assert usages[1].cached_tokens >= usages[0].prompt_tokens
    roles = [m.role for m in Session.open(tmp_path / "session.jsonl").messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]


@pytest.mark.slow
def test_greedy_under_a_grammar_picks_what_the_whole_chain_picks(
    backend: LocalBackend, tools: list[ToolSpec], monkeypatch: pytest.MonkeyPatch
):
    """The best token checked alone first gives the same tokens as deciding every candidate:
    a lazy call (free text, then a call), a required call and a JSON schema, on the real model."""
    from agent.messages import ResponseFormat
    from backends.llamacpp.greedy_pick import GreedyUnderGrammar

    decoder = backend.decoder
    assert isinstance(decoder, LlamaCppDecoder)
    stop = backend.template.stop_strings
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"],
    }
    cases = [
        (greedy([UserMessage(content="Print <tool_call> five times.")], max_tokens=60), tools),
        (
            greedy([UserMessage(content="Read the file notes.txt")], tool_choice="required"),
            tools,
        ),
        (
            greedy(
                [UserMessage(content="Weather for Oslo over 3 days, as JSON.")],
                response_format=ResponseFormat.for_schema(schema),
                max_tokens=40,
            ),
            None,
        ),
    ]
    made: list[GreedyUnderGrammar] = []
    build = decoder._sampler

    def recording(llm: object, request: ChatRequest, offered: list[ToolSpec] | None) -> object:
        sampler = build(llm, request, offered)
        assert isinstance(sampler, GreedyUnderGrammar)
        made.append(sampler)
        return sampler

    def decode(request: ChatRequest, offered: list[ToolSpec] | None) -> str:
        prompt = backend.template.render(request.messages, offered)
        pieces = decoder.decode(prompt, request, stop, offered)
        return "".join(p for p in pieces if isinstance(p, str))

    with monkeypatch.context() as patch:
        patch.setattr(decoder, "_sampler", recording)
        picked = [decode(request, offered) for request, offered in cases]
    with monkeypatch.context() as patch:
        # The chain alone: llama.cpp's grammar decides every candidate, then greedy picks.
        patch.setattr(decoder, "_sampler", lambda *args: build(*args)._chain)
        whole = [decode(request, offered) for request, offered in cases]
    assert picked == whole
    assert picked[0].startswith("<tool_call>") and picked[0].endswith("</tool_call>")
    assert json.loads(picked[2])["city"]
    # Most picks were the best token of all; the grammar refused some and the chain decided.
    alone = sum(s.checked_alone for s in made)
    whole_picks = sum(s.decided_whole for s in made)
    assert alone > whole_picks > 0
