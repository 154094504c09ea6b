"""The tool-call JSON schema, and the GBNF the llama.cpp backend builds from it."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel

from agent.messages import ToolSpec
from agent.tools import Toolbox, function_tool
from backends.local.tool_format import HERMES, LLAMA3, MISTRAL
from backends.local.tool_grammar import tool_call_schema


def valid(schema: dict[str, Any], call: Any) -> bool:
    return Draft202012Validator(schema).is_valid(call)


def test_one_alternative_per_tool(tools: list[ToolSpec]):
    schema = tool_call_schema(tools)
    assert [alt["properties"]["name"] for alt in schema["anyOf"]] == [
        {"const": "weather"},
        {"const": "read"},
    ]
    assert valid(schema, {"name": "weather", "arguments": {"city": "Oslo"}})
    assert valid(schema, {"name": "read", "arguments": {"path": "a", "limit": 3}})
    assert not valid(schema, {"name": "write", "arguments": {"path": "a"}})  # no such tool
    assert not valid(schema, {"name": "read", "arguments": {"city": "Oslo"}})  # other tool's args
    assert not valid(schema, {"name": "read", "arguments": {"path": 1}})
    assert not valid(schema, {"name": "read"})
    assert not valid(schema, {"name": "read", "arguments": {"path": "a"}, "id": 1})
    assert not valid(schema, {"name": "read", "arguments": {"path": "a", "mode": "x"}})
    # The offered specs are not modified.
    assert "additionalProperties" not in tools[1].function.parameters


def test_single_tool_needs_no_anyof(tools: list[ToolSpec]):
    schema = tool_call_schema(tools[:1])
    assert "anyOf" not in schema and schema["properties"]["name"] == {"const": "weather"}
    assert list(schema["properties"]) == ["name", "arguments"]  # the order grammars follow
    with pytest.raises(ValueError):
        tool_call_schema([])


class Point(BaseModel):
    x: int
    y: int


def test_defs_are_hoisted_and_refs_rewritten():
    def move(to: Point, speed: float = 1.0) -> str:
        """Move to a point."""
        return f"{to.x},{to.y}"

    def draw(points: list[Point]) -> str:
        """Draw a polyline."""
        return str(len(points))

    specs = Toolbox([function_tool(move), function_tool(draw)]).specs()
    assert "$defs" in specs[0].function.parameters  # pydantic puts Point there
    schema = tool_call_schema(specs)
    assert set(schema["$defs"]) == {"move.Point", "draw.Point"}
    assert valid(schema, {"name": "move", "arguments": {"to": {"x": 1, "y": 2}}})
    assert valid(schema, {"name": "draw", "arguments": {"points": [{"x": 1, "y": 2}]}})
    assert not valid(schema, {"name": "move", "arguments": {"to": {"x": "far"}}})
    if importlib.util.find_spec("llama_cpp"):
        from llama_cpp import LlamaGrammar

        gbnf = HERMES.gbnf(specs)
        assert "move-Point" in gbnf or "move.Point" in gbnf
        LlamaGrammar.from_string(gbnf, verbose=False)


def test_gbnf_compiles_in_llama_cpp(tools: list[ToolSpec]):
    llama_cpp = pytest.importorskip("llama_cpp")
    for max_calls in (1, 4):
        gbnf = HERMES.gbnf(tools, max_calls)
        assert gbnf.startswith("root ::= clawloop-call")
        llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)
    for fmt in (MISTRAL, LLAMA3):  # the other formats' grammars compile too
        for max_calls in (1, 4):
            llama_cpp.LlamaGrammar.from_string(fmt.gbnf(tools, max_calls), verbose=False)


def test_gbnf_strings_are_json_strings(tools: list[ToolSpec]):
    """llama-cpp-python's converter lets a raw newline into a string, which no JSON parser
    takes; the grammar built here follows JSON. Checked with xgrammar's matcher on the same
    GBNF text, as llama-cpp-python exposes no way to test a string against a grammar."""
    pytest.importorskip("llama_cpp")
    xgr = pytest.importorskip("xgrammar")
    grammar = xgr.Grammar.from_ebnf(HERMES.gbnf(tools))
    call = '<tool_call>\n{"name": "weather", "arguments": {"city": "%s"}}\n</tool_call>'
    accepts = xgr.testing._is_grammar_accept_string
    assert accepts(grammar, call % "Oslo\\nBergen \\u00e9")
    for raw in ("Oslo\nBergen", "Oslo\tBergen", "bell\x07"):
        assert not accepts(grammar, call % raw), repr(raw)
