"""``agent serve`` driven by the official ``openai`` client: completions, streams, tools, JSON."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import jsonschema
import pytest
from serve_support import Served, metric

openai = pytest.importorskip("openai")

LIST_FILES: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "list_files",
        "description": "List the files in a folder.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def client(server: Served) -> Any:
    return openai.OpenAI(base_url=server.base_url, api_key=server.api_key or "none", max_retries=0)


def test_plain_completion_answers_with_usage(server: Served) -> None:
    reply = client(server).chat.completions.create(
        model=server.model, messages=QUESTION, temperature=0, max_tokens=12
    )
    choice = reply.choices[0]
    assert "Paris" in (choice.message.content or "")
    assert choice.finish_reason in ("stop", "length")
    assert reply.usage.prompt_tokens > 10 and 0 < reply.usage.completion_tokens <= 12
    again = client(server).chat.completions.create(
        model=server.model, messages=QUESTION, temperature=0, max_tokens=12
    )
    assert again.choices[0].message.content == choice.message.content
    # The second time the prompt's full blocks come from the prefix cache.
    assert again.usage.prompt_tokens_details.cached_tokens >= 16


def test_streaming_gives_the_same_text_and_a_usage_chunk(server: Served) -> None:
    api = client(server)
    whole = api.chat.completions.create(
        model=server.model, messages=QUESTION, temperature=0, max_tokens=12
    )
    stream = api.chat.completions.create(
        model=server.model,
        messages=QUESTION,
        temperature=0,
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 2  # really streamed
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == whole.choices[0].finish_reason and not any(finishes[:-1])


def test_completions_endpoint_and_models(server: Served) -> None:
    api = client(server)
    assert [m.id for m in api.models.list().data] == [server.model]
    reply = api.completions.create(
        model=server.model, prompt="The capital of France is", max_tokens=4, temperature=0
    )
    assert reply.choices[0].text and reply.usage.completion_tokens == 4
    streamed = api.completions.create(
        model=server.model,
        prompt="The capital of France is",
        max_tokens=4,
        temperature=0,
        stream=True,
    )
    assert "".join(c.choices[0].text for c in streamed if c.choices) == reply.choices[0].text


def test_tool_call_round_trip_with_streamed_deltas(server: Served) -> None:
    api = client(server)
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "List the files in the folder /tmp."}
    ]
    stream = api.chat.completions.create(
        model=server.model,
        messages=messages,
        tools=[LIST_FILES],
        tool_choice="required",
        temperature=0,
        max_tokens=48,
        stream=True,
    )
    deltas = [call for c in stream if c.choices for call in (c.choices[0].delta.tool_calls or [])]
    first, rest = deltas[0], deltas[1:]
    assert (first.index, first.type, first.function.name) == (0, "function", "list_files")
    assert first.id and first.function.arguments == ""
    assert rest and all(d.id is None and d.function.name is None for d in rest)
    arguments = json.loads("".join(d.function.arguments for d in rest if d.index == 0))
    assert isinstance(arguments["path"], str)

    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": first.id,
                    "type": "function",
                    "function": {"name": "list_files", "arguments": json.dumps(arguments)},
                }
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": first.id, "content": "notes.txt\nplan.md"})
    answer = api.chat.completions.create(
        model=server.model, messages=messages, tools=[LIST_FILES], temperature=0, max_tokens=16
    )
    assert answer.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert answer.usage.prompt_tokens_details.cached_tokens > 0  # the first turn was reused


def test_named_tool_choice_calls_that_tool(server: Served) -> None:
    other = {**LIST_FILES, "function": {**LIST_FILES["function"], "name": "read_file"}}
    reply = client(server).chat.completions.create(
        model=server.model,
        messages=[{"role": "user", "content": "Show me notes.txt"}],
        tools=[LIST_FILES, other],
        tool_choice={"type": "function", "function": {"name": "read_file"}},
        temperature=0,
        max_tokens=48,
    )
    calls = reply.choices[0].message.tool_calls
    assert reply.choices[0].finish_reason == "tool_calls"
    assert calls and calls[0].function.name == "read_file"
    json.loads(calls[0].function.arguments)


def test_json_schema_output_validates(server: Served) -> None:
    schema = {
        "type": "object",
        # Bounded, so that a small model's output always closes within max_tokens.
        "properties": {
            "city": {"type": "string", "maxLength": 24},
            "is_capital": {"type": "boolean"},
        },
        "required": ["city", "is_capital"],
        "additionalProperties": False,
    }
    reply = client(server).chat.completions.create(
        model=server.model,
        messages=[{"role": "user", "content": "Give the largest city of France as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema}},
        temperature=0,
        max_tokens=64,
    )
    assert reply.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(reply.choices[0].message.content or ""), schema)
    loose = client(server).chat.completions.create(
        model=server.model,
        messages=[{"role": "user", "content": "Describe Paris as JSON."}],
        response_format={"type": "json_object"},
        temperature=0,
        max_tokens=64,
    )
    if loose.choices[0].finish_reason == "stop":  # cut short by max_tokens it cannot be whole
        assert isinstance(json.loads(loose.choices[0].message.content or ""), dict)
    else:
        assert (loose.choices[0].message.content or "").startswith("{")


def test_sixteen_concurrent_clients_get_what_each_gets_alone(server: Served) -> None:
    api = client(server)
    prompts = [f"Count from {i} to {i + 5}, please." for i in range(16)]

    def ask(prompt: str) -> str:
        reply = api.chat.completions.create(
            model=server.model,
            messages=[{"role": "user", "content": prompt}],
            temperature=0,
            max_tokens=8,
        )
        return reply.choices[0].message.content or ""

    alone = [ask(p) for p in prompts]
    together: dict[int, str] = {}
    start = threading.Barrier(len(prompts))

    def worker(i: int) -> None:
        start.wait()
        together[i] = ask(prompts[i])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert [together[i] for i in range(len(prompts))] == alone


def test_a_disconnecting_client_frees_its_blocks(server: Served) -> None:
    before = metric(server, "vllm:generation_tokens_total")
    with client(server).chat.completions.create(
        model=server.model,
        messages=[{"role": "user", "content": "Write a very long story about a lighthouse."}],
        temperature=0,
        max_tokens=1000,
        stream=True,
    ) as stream:
        for i, _ in enumerate(stream):
            if i == 3:
                break
        assert metric(server, "vllm:num_requests_running") == 1
        assert metric(server, "vllm:kv_cache_usage_perc") > 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and metric(server, "vllm:num_requests_running") > 0:
        time.sleep(0.05)
    assert metric(server, "vllm:num_requests_running") == 0
    assert metric(server, "vllm:kv_cache_usage_perc") == 0.0
    assert metric(server, "vllm:generation_tokens_total") - before < 200  # stopped, not run out


def test_metrics_use_vllm_names(server: Served) -> None:
    import httpx

    text = httpx.get(f"{server.root}/metrics", timeout=10).text
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:num_preemptions_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket",
    ):
        assert f"\n{name}{{" in text, name
    assert metric(server, "vllm:prefix_cache_hits_total") <= metric(
        server, "vllm:prefix_cache_queries_total"
    )


def test_speculative_decoding_is_a_request_extension(server: Served) -> None:
    """``num_speculative_tokens`` in the body turns on prompt lookup: same greedy text, and the
    drafts show in the vLLM spec-decode counters."""
    messages = [
        {"role": "user", "content": "Repeat exactly: config/settings.yaml, config/settings.yaml"}
    ]
    api = client(server)
    plain = api.chat.completions.create(
        model=server.model, messages=messages, temperature=0, max_tokens=24
    )
    drafted = metric(server, "vllm:spec_decode_num_draft_tokens_total")
    fast = api.chat.completions.create(
        model=server.model,
        messages=messages,
        temperature=0,
        max_tokens=24,
        extra_body={"num_speculative_tokens": 4},
    )
    assert fast.choices[0].message.content == plain.choices[0].message.content
    assert metric(server, "vllm:spec_decode_num_draft_tokens_total") > drafted
    assert metric(server, "vllm:spec_decode_num_accepted_tokens_total") <= metric(
        server, "vllm:spec_decode_num_draft_tokens_total"
    )


def test_a_tool_call_drafts_unasked_and_plain_text_does_not(server: Served) -> None:
    """Unasked, a request under a tool-call grammar drafts (the CPU default: the text the
    grammar forces rides in the drafts), with the same greedy call as with drafts off; a
    request without tools drafts only when it asks."""
    api = client(server)
    messages = [{"role": "user", "content": "List the files in the folder /tmp/notes."}]

    def call(**extra: Any) -> Any:
        reply = api.chat.completions.create(
            model=server.model,
            messages=messages,
            tools=[LIST_FILES],
            tool_choice="required",
            temperature=0,
            max_tokens=48,
            **extra,
        )
        return reply.choices[0].message.tool_calls[0].function

    steps = "vllm:spec_decode_num_drafts_total"
    before = metric(server, steps)
    off = call(extra_body={"num_speculative_tokens": 0})
    assert metric(server, steps) == before
    on = call()
    assert metric(server, steps) > before
    assert (on.name, on.arguments) == (off.name, off.arguments)
    before = metric(server, steps)
    api.chat.completions.create(model=server.model, messages=QUESTION, temperature=0, max_tokens=16)
    assert metric(server, steps) == before
