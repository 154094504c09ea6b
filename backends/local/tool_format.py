"""The tool-call format: how a family of models writes tool calls in plain text.

One object holds everything that depends on it: the tags, the JSON layout a call is written
in (which the chat template writes back, so a generated call re-renders to the same text), the
parser that reads calls back out of generated text, the stream filter that keeps call markup out
of streamed content, the grammars that constrain a call once it starts (GBNF for llama.cpp, an
xgrammar structural tag for the bundled engine), and the hint a model reads when its call could
not be read. The format is chosen together with the chat template (:func:`format_for_template`).

- ``hermes`` (the built-in ChatML template, Qwen2.5, Hermes)::

      <tool_call>
      {"name": "files_read", "arguments": {"path": "notes.txt"}}
      </tool_call>

- ``mistral``: ``[TOOL_CALLS][{"name": ..., "arguments": {...}}]`` up to the end of the turn.
- ``llama3``: ``<|python_tag|>{"name": ..., "parameters": {...}}`` up to the end of the turn.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agent.messages import ToolSpec
from backends.local.content_stream import ContentStream
from backends.local.json_gbnf import json_gbnf
from backends.local.parsing import ParsedOutput, parse_output
from backends.local.tool_grammar import tool_call_schema_json

_MAX_WHITESPACE = 16


@dataclass(frozen=True, slots=True)
class ToolCallFormat:
    """Tags, layout, parser, stream filter, grammars and repair hint of one tool-call format."""

    name: str
    open: str
    close: str  # "" when a call runs to the end of the turn
    arguments_key: str = "arguments"
    as_list: bool = False  # the calls are one JSON list after ``open``
    newline: bool = True  # a newline stands after ``open`` and before ``close``

    def render_call(self, name: str, arguments_json: str) -> str:
        """One call as the template writes it (``json.dumps`` spacing)."""
        named = json.dumps(name, ensure_ascii=False)
        body = f'{{"name": {named}, "{self.arguments_key}": {arguments_json}}}'
        if self.as_list:
            body = f"[{body}]"
        nl = "\n" if self.newline else ""
        return f"{self.open}{nl}{body}{nl}{self.close}" if self.close else f"{self.open}{body}"

    def parse(self, text: str) -> ParsedOutput:
        """The assistant message in ``text``, with the reason if call markup was unreadable."""
        return parse_output(text, self.open, self.close)

    def stream(self) -> ContentStream:
        """A filter that passes content and holds back call markup."""
        return ContentStream(self.open)

    @property
    def trigger_pattern(self) -> str:
        """A regex matching text up to and including the call's opening tag (llama.cpp lazy
        grammars start constraining at its first group)."""
        return r"[\s\S]*?(" + re.escape(self.open) + r")[\s\S]*"

    def gbnf(self, tools: list[ToolSpec], max_calls: int = 1) -> str:
        """GBNF for one to ``max_calls`` calls to the offered tools, starting at the tag.

        The JSON is pinned to the layout the chat template writes back (``", "`` and ``": "``,
        no other whitespace), so the generated turn re-renders as the same text.
        """
        json_rules = json_gbnf(tool_call_schema_json(tools, self.arguments_key))
        json_rules = re.sub(r"^root ::=", "clawloop-call-json ::=", json_rules, flags=re.M)
        json_rules = json_rules.replace('"," space', '", "').replace('":" space', '": "')
        nl = "\n" if self.newline else ""
        open_tag, close_tag = _gbnf_text(self.open + nl), _gbnf_text(nl + self.close)
        if self.as_list:
            more = f' ("," " " clawloop-call-json){{0,{max_calls - 1}}}' if max_calls > 1 else ""
            root = f'root ::= "{open_tag}[" clawloop-call-json{more} "]"\n'
        else:
            close = f' "{close_tag}"' if self.close else ""
            more = f" (clawloop-sep clawloop-call){{0,{max_calls - 1}}}" if max_calls > 1 else ""
            root = (
                f"root ::= clawloop-call{more}\n"
                f'clawloop-call ::= "{open_tag}" clawloop-call-json{close}\n'
                'clawloop-sep ::= "\\n"\n'
            )
        return root + json_rules

    def structural_tag(self, specs: list[dict[str, Any]], required: bool = False) -> str:
        """xgrammar structural tag (JSON): free text, and after the tag one call to a tool."""
        prefixes = ("\n", "") if self.newline else ("",)
        opener = "[" if self.as_list else ""
        closer = "]" if self.as_list else ""
        tags = [
            {
                "type": "tag",
                "begin": (
                    f"{self.open}{nl}{opener}"
                    f'{{"name": {json.dumps(spec["name"])}, "{self.arguments_key}": '
                ),
                "content": {
                    "type": "json_schema",
                    "json_schema": spec["parameters"],
                    "max_whitespace_cnt": _MAX_WHITESPACE,
                },
                "end": (
                    [f"}}{closer}\n{self.close}", f"}}{closer}{self.close}"]
                    if self.close
                    else [f"}}{closer}"]
                ),
            }
            for spec in specs
            for nl in prefixes
        ]
        fmt = {
            "type": "triggered_tags",
            "triggers": [self.open],
            "tags": tags,
            "at_least_one": required,
        }
        return json.dumps({"type": "structural_tag", "format": fmt})

    def repair_hint(self, tool_names: list[str]) -> str:
        """What a model reads when its call could not be read."""
        example = self.render_call("TOOL", "{...}").replace("\n", " ")
        known = ", ".join(tool_names) or "(none)"
        return (
            f"error: your tool call could not be read. Write it as {example} with one JSON "
            f"object holding the tool's name and its {self.arguments_key}. "
            f"Available tools: {known}."
        )


HERMES = ToolCallFormat("hermes", "<tool_call>", "</tool_call>")
MISTRAL = ToolCallFormat("mistral", "[TOOL_CALLS]", "", as_list=True, newline=False)
LLAMA3 = ToolCallFormat("llama3", "<|python_tag|>", "", arguments_key="parameters", newline=False)
FORMATS = {f.name: f for f in (HERMES, MISTRAL, LLAMA3)}


def format_for_template(source: str | None, uses_builtin: bool) -> ToolCallFormat:
    """The format a chat template writes calls in; the built-in ChatML one writes Hermes."""
    if uses_builtin or not source:
        return HERMES
    if HERMES.open in source:
        return HERMES
    if MISTRAL.open in source:
        return MISTRAL
    if LLAMA3.open in source:
        return LLAMA3
    return HERMES


def _gbnf_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
