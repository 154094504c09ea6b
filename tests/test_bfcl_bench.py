"""bench/bfcl.py: BFCL's schema conversion and AST checker on hand-made cases, and one case
through clawloop's real template and parser with a scripted decoder (no model)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from agent.messages import ChatRequest, ToolSpec
from backends.base import DecodeResult, LocalBackend
from backends.local.chat_template import ChatTemplate
from backends.local.tool_grammar import tool_call_schema
from bench.bfcl import Case, Outcome, RequestShape, load_cases, rechecked, run_case, sample
from bench.bfcl_checker import check_ast, check_irrelevance
from bench.bfcl_schema import to_tool_specs

HYPOT: dict[str, Any] = {
    "name": "math.hypot",
    "description": "The Euclidean norm.",
    "parameters": {
        "type": "dict",
        "properties": {
            "x": {"type": "integer", "description": "x."},
            "y": {"type": "float", "description": "y."},
            "z": {"type": "integer", "description": "z, optional."},
        },
        "required": ["x", "y"],
    },
}
HYPOT_ANSWER = [{"math.hypot": {"x": [4], "y": [5.0], "z": ["", 0]}}]

WEATHER: dict[str, Any] = {
    "name": "weather.get",
    "description": "Weather in a city.",
    "parameters": {
        "type": "dict",
        "properties": {
            "city": {"type": "string", "description": "The city."},
            "days": {"type": "tuple", "items": {"type": "float"}, "description": "Days."},
            "options": {
                "type": "dict",
                "properties": {"unit": {"type": "string", "description": "Unit."}},
                "description": "Options.",
            },
            "anything": {"type": "any", "description": "Anything."},
        },
        "required": ["city"],
    },
}
WEATHER_ANSWER = [{"weather.get": {"city": ["San Francisco, CA"], "days": [""], "options": [""]}}]


def call(name: str, **arguments: Any) -> tuple[str, str]:
    return name, json.dumps(arguments)


def test_schema_conversion_follows_bfcl_for_openai_models() -> None:
    [spec] = to_tool_specs([WEATHER])
    fn = spec.function
    assert fn.name == "weather_get"  # OpenAI names have no dots
    assert fn.description.endswith("Note that the provided function is in Python 3 syntax.")
    params = fn.parameters
    assert params["type"] == "object"
    props = params["properties"]
    assert props["city"]["type"] == "string"
    assert props["days"] == {"type": "array", "items": {"type": "number"}, "description": "Days."}
    assert props["options"]["type"] == "object"
    assert props["options"]["properties"]["unit"]["type"] == "string"
    assert props["anything"]["type"] == "string"
    [hypot] = to_tool_specs([HYPOT])
    y = hypot.function.parameters["properties"]["y"]
    assert y == {
        "type": "number",
        "format": "float",
        "description": "y. This is a float type value.",
    }
    assert WEATHER["parameters"]["type"] == "dict"  # the case's own document is left alone
    # clawloop's grammar schema is built from it as from any tool
    schema = tool_call_schema([spec])
    assert schema["properties"]["name"] == {"const": "weather_get"}


def test_a_correct_call_passes() -> None:
    assert check_ast([HYPOT], [call("math_hypot", x=4, y=5)], HYPOT_ANSWER, "simple_python")[
        "valid"
    ]  # an integer is accepted for a float, as in Python
    ok = call("weather_get", city="san francisco ca")  # case, spaces and commas do not count
    assert check_ast([WEATHER], [ok], WEATHER_ANSWER, "simple_python")["valid"]


@pytest.mark.parametrize(
    ("calls", "error_type"),
    [
        ([call("math_hypot", x=3, y=5.0)], "value_error:others"),
        ([call("math_hypot", x=True, y=5.0)], "type_error:simple"),
        ([call("math_hypot", x=4)], "simple_function_checker:missing_required"),
        ([call("math_hypot", x=4, y=5.0, w=1)], "simple_function_checker:unexpected_param"),
        ([call("math.hypot", x=4, y=5.0)], "simple_function_checker:wrong_func_name"),
        ([], "simple_function_checker:wrong_count"),
        ([("math_hypot", "{x: 4")], "ast_decoder:decoder_failed"),
    ],
)
def test_a_wrong_call_fails(calls: list[tuple[str, str]], error_type: str) -> None:
    result = check_ast([HYPOT], calls, HYPOT_ANSWER, "simple_python")
    assert not result["valid"]
    assert result["error_type"] == error_type


def test_multiple_wants_the_expected_function_among_several() -> None:
    functions = [WEATHER, HYPOT]
    right = check_ast(functions, [call("math_hypot", x=4, y=5.0)], HYPOT_ANSWER, "multiple")
    wrong = check_ast(functions, [call("weather_get", city="Paris")], HYPOT_ANSWER, "multiple")
    assert right["valid"]
    assert not wrong["valid"]


def test_irrelevance_is_right_only_without_a_call() -> None:
    assert check_irrelevance([])["valid"]
    assert not check_irrelevance([call("math_hypot", x=1, y=2.0)])["valid"]
    assert check_irrelevance([("math_hypot", "not json")])["valid"]  # BFCL: no call decodes


class ScriptedDecoder:
    """Writes one fixed text, whatever the prompt, and keeps the prompt it was given."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.prompts: list[str] = []

    def decode(
        self, prompt: str, request: ChatRequest, stop: list[str], tools: list[ToolSpec] | None
    ) -> Iterator[str | DecodeResult]:
        self.prompts.append(prompt)
        yield self.text
        yield DecodeResult()


def run_scripted(text: str, case: Case, shape: RequestShape) -> tuple[bool, str]:
    decoder = ScriptedDecoder(text)
    backend = LocalBackend("scripted", ChatTemplate(None), decoder)
    outcome = run_case(backend, shape, case, "scripted")
    return outcome.valid, decoder.prompts[0]


def test_a_case_through_clawloops_template_and_parser() -> None:
    answer = ToolSpec.model_validate(
        {"function": {"name": "answer", "parameters": {"type": "object"}}}
    )
    shape = RequestShape("clawloop", "Be brief.", answer, 64)
    case = Case(
        "simple_python_x",
        "simple_python",
        [{"role": "user", "content": "hypot 4 5"}],
        [HYPOT],
        HYPOT_ANSWER,
    )
    good = '<tool_call>\n{"name": "math_hypot", "arguments": {"x": 4, "y": 5.0}}\n</tool_call>'
    valid, prompt = run_scripted(good, case, shape)
    assert valid
    assert '"name": "math_hypot"' in prompt and '"name": "answer"' in prompt
    assert prompt.startswith("<|im_start|>system\nBe brief.")
    irrelevant = Case("irrelevance_x", "irrelevance", case.question, [HYPOT], None)
    said = '<tool_call>\n{"name": "answer", "arguments": {"text": "I cannot."}}\n</tool_call>'
    assert run_scripted(said, irrelevant, shape)[0]  # the answer tool is a text reply
    assert run_scripted("I cannot.", irrelevant, shape)[0]
    assert not run_scripted(good, irrelevant, shape)[0]


def test_the_agent_mapping_offers_what_the_profiles_tool_selection_offers() -> None:
    answer = ToolSpec.model_validate(
        {"function": {"name": "answer", "parameters": {"type": "object"}}}
    )
    shape = RequestShape("agent", "Be brief.", answer, 64)
    # No word of the question is in either function: only the answer tool is offered.
    unrelated = Case("irrelevance_y", "irrelevance", [{"role": "user", "content": "Hi!"}],
                     [HYPOT, WEATHER], None)  # fmt: skip
    request = shape.request(unrelated)
    assert [t.function.name for t in request.tools or []] == ["answer"]
    assert request.allowed_tools is None
    # A matching question shows the matching function and the answer tool, but the answer is
    # held back on the first reply (the profile looks before it answers).
    weather = Case("simple_python_y", "simple_python",
                   [{"role": "user", "content": "What is the weather in Paris?"}],
                   [HYPOT, WEATHER], WEATHER_ANSWER)  # fmt: skip
    request = shape.request(weather)
    assert [t.function.name for t in request.tools or []] == ["weather_get", "answer"]
    assert request.allowed_tools == ["weather_get"]


PARIS = [{"role": "user", "content": "What is the weather in Paris?"}]
IN_PARIS = '<tool_call>\n{"name": "weather_get", "arguments": {"city": "Paris"}}\n</tool_call>'
IN_LIMA = '<tool_call>\n{"name": "weather_get", "arguments": {"city": "Lima"}}\n</tool_call>'


def agent_shape_and_paris_case() -> tuple[RequestShape, Case]:
    """The agent mapping's request shape, and a weather case asked about Paris."""
    answer = ToolSpec.model_validate(
        {"function": {"name": "answer", "parameters": {"type": "object"}}}
    )
    truth = [{"weather.get": {"city": ["Paris"], "days": [""], "options": [""]}}]
    weather = Case("simple_python_z", "simple_python", PARIS, [WEATHER], truth)
    return RequestShape("agent", "Be brief.", answer, 64), weather


def scripted_case(reply: str, shape: RequestShape, case: Case) -> Outcome:
    return run_case(LocalBackend("s", ChatTemplate(None), ScriptedDecoder(reply)), shape, case, "s")


def test_the_agent_mapping_does_not_count_a_call_built_from_made_up_values() -> None:
    shape, weather = agent_shape_and_paris_case()
    kept = scripted_case(IN_PARIS, shape, weather)
    assert kept.valid and kept.unchecked and kept.guessed == []
    gated = scripted_case(IN_LIMA, shape, weather)
    assert gated.guessed == ["city='Lima'"] and gated.unchecked is False and not gated.valid
    # On irrelevance the made-up call becomes a text reply: right, where unchecked it is wrong.
    irrelevant = Case("irrelevance_z", "irrelevance", PARIS, [WEATHER], None)
    outcome = scripted_case(IN_LIMA, shape, irrelevant)
    assert outcome.valid and outcome.unchecked is False


def test_a_stored_reply_is_checked_again_with_the_check_as_it_is_now() -> None:
    shape, weather = agent_shape_and_paris_case()
    stored = scripted_case(IN_PARIS, shape, weather)
    # As if an older check had refused it: checked again, the reply is right, and no model ran.
    refused = replace(stored, valid=False, guessed=["city='Paris'"], error="wrong_count")
    again = rechecked(refused, shape, weather)
    assert again.valid and again.guessed == [] and again.error == ""
    lima = replace(stored, calls=[("weather_get", '{"city": "Lima"}')])
    assert rechecked(lima, shape, weather).guessed == ["city='Lima'"]


def test_the_vendored_data_loads_and_samples_stably() -> None:
    cases = {c: load_cases(c) for c in ("simple_python", "multiple", "irrelevance")}
    assert [len(v) for v in cases.values()] == [400, 200, 240]
    assert all(c.answer for c in cases["simple_python"] + cases["multiple"])
    first = [c.id for c in sample(cases["multiple"], 5, seed=0)]
    assert first == [c.id for c in sample(cases["multiple"], 5, seed=0)]
    assert len(set(first)) == 5
    assert set(first) <= {c.id for c in sample(cases["multiple"], 12, seed=0)}  # it grows


def test_live_cases_become_training_examples_of_the_agent_mappings_request() -> None:
    from bench.bfcl_live_examples import example, gold_call

    assert gold_call([{"weather.get": {"city": ["Paris", "paris"], "days": [""]}}]) == (
        "weather_get",
        {"city": "Paris"},
    )
    assert gold_call([{"a": {}}, {"b": {}}]) is None  # parallel calls are not one reply
    answer = ToolSpec.model_validate(
        {"function": {"name": "answer", "parameters": {"type": "object"}}}
    )
    shape = RequestShape("agent", "Be brief.", answer, 64)
    asked = [{"role": "user", "content": "What is the weather in Paris?"}]
    truth = [{"weather.get": {"city": ["Paris"], "days": [""], "options": [""]}}]
    made = example(Case("live_simple_1", "live_simple", asked, [HYPOT, WEATHER], truth), shape)
    assert made is not None
    assert [m["role"] for m in made["messages"]] == ["system", "user", "assistant"]
    [called] = made["messages"][-1]["tool_calls"]
    assert called["function"] == {"name": "weather_get", "arguments": '{"city": "Paris"}'}
    assert [t["function"]["name"] for t in made["tools"]] == ["weather_get", "answer"]
    # The selection does not offer hypot for this question: no example the model could not make.
    wrong = [{"math.hypot": {"x": [4], "y": [5.0]}}]
    unoffered = Case("live_simple_2", "live_simple", asked, [HYPOT, WEATHER], wrong)
    assert example(unoffered, shape) is None
