"""Output parsing: tool-call blocks, bare calls, malformed calls, and fuzzing."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.messages import AssistantMessage, ToolCall
from agent.tools import Toolbox, function_tool
from agent.validation import check_call
from backends.local.parsing import CLOSE, OPEN
from backends.local.tool_format import HERMES, LLAMA3, MISTRAL, format_for_template


def parse_output(text: str) -> AssistantMessage:
    return HERMES.parse(text).message


def calls_of(message: AssistantMessage) -> list[tuple[str, Any]]:
    out = []
    for call in message.tool_calls or []:
        try:
            args = json.loads(call.function.arguments)
        except json.JSONDecodeError:
            args = ("raw", call.function.arguments)
        out.append((call.function.name, args))
    return out


def test_plain_text_is_content():
    message = parse_output("  The answer is 42.\n")
    assert message.content == "The answer is 42." and message.tool_calls is None


def test_one_call_with_text_before():
    text = (
        'Let me look.\n<tool_call>\n{"name": "read", "arguments": {"path": "a.txt"}}\n</tool_call>'
    )
    message = parse_output(text)
    assert message.content == "Let me look."
    assert calls_of(message) == [("read", {"path": "a.txt"})]
    call = (message.tool_calls or [])[0]
    assert call.id.startswith("call_") and call.type == "function"


def test_several_calls_and_text_between_are_kept_in_order():
    text = (
        'A<tool_call>{"name": "x", "arguments": {}}</tool_call> B '
        '<tool_call>{"name": "y", "arguments": {"n": 1}}</tool_call>C'
    )
    message = parse_output(text)
    assert message.content == "A B C"
    assert calls_of(message) == [("x", {}), ("y", {"n": 1})]
    ids = [c.id for c in message.tool_calls or []]
    assert len(set(ids)) == 2


def test_unterminated_last_block():
    message = parse_output('<tool_call>\n{"name": "read", "arguments": {"path": "b"}}\n')
    assert message.content is None
    assert calls_of(message) == [("read", {"path": "b"})]


def test_arguments_as_json_string_and_parameters_spelling():
    message = parse_output(
        '<tool_call>{"name": "a", "arguments": "{\\"k\\": 2}"}</tool_call>'
        '<tool_call>{"name": "b", "parameters": {"k": 3}}</tool_call>'
        '<tool_call>{"name": "c"}</tool_call>'
    )
    assert calls_of(message) == [("a", {"k": 2}), ("b", {"k": 3}), ("c", {})]


def test_list_of_calls_in_one_block():
    text = '[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]'
    text = OPEN + text + CLOSE
    assert calls_of(parse_output(text)) == [("a", {}), ("b", {"x": 1})]


def test_bare_json_call_is_a_call():
    message = parse_output(' {"name": "weather", "arguments": {"city": "Oslo"}}\n')
    assert message.content is None
    assert calls_of(message) == [("weather", {"city": "Oslo"})]


def test_json_answer_without_arguments_is_content():
    text = '{"name": "Ada Lovelace", "born": 1815}'
    assert parse_output(text) == AssistantMessage(content=text)


def test_a_raw_newline_inside_a_string_is_read_as_one():
    # Strict JSON refuses control characters in strings; a model that writes a line break
    # inside its answer means the line break, so the call is read, not turned into an error.
    body = '{"name": "answer", "arguments": {"text": "printed:\nANCHOR\tISLAND"}}'
    message = parse_output(f"{OPEN}{body}{CLOSE}")
    assert calls_of(message) == [("answer", {"text": "printed:\nANCHOR\tISLAND"})]
    bare = parse_output('{"name": "answer", "arguments": {"text": "a\nb"}}')
    assert calls_of(bare) == [("answer", {"text": "a\nb"})]


def test_bad_json_keeps_the_name_and_the_raw_text():
    body = '{"name": "read", "arguments": {"path": "a.txt"'
    message = parse_output(f"{OPEN}{body}{CLOSE}")
    assert calls_of(message) == [("read", ("raw", body))]


def test_a_call_without_a_readable_name_is_a_parse_error_not_a_call():
    for body in ("call read please", "", '{"tool": "read", "args": {}}'):
        parsed = HERMES.parse(f"before {OPEN}{body}{CLOSE}")
        assert parsed.message.tool_calls is None
        assert parsed.message.content == "before"
        assert parsed.error is not None and "no tool name" in parsed.error


def test_a_readable_call_next_to_an_unreadable_one_is_kept():
    parsed = HERMES.parse(f'{OPEN}nonsense{CLOSE}{OPEN}{{"name": "a", "arguments": {{}}}}{CLOSE}')
    assert calls_of(parsed.message) == [("a", {})]
    assert parsed.error is not None


def test_repair_hint_shows_the_format_and_the_tools():
    hint = HERMES.repair_hint(["files_read", "shell"])
    assert OPEN in hint and CLOSE in hint and "files_read, shell" in hint


def test_other_formats_parse_their_own_layout():
    mistral = MISTRAL.parse(
        '[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]'
    )
    assert calls_of(mistral.message) == [("a", {"x": 1}), ("b", {})]
    llama = LLAMA3.parse('<|python_tag|>{"name": "weather", "parameters": {"city": "Oslo"}}')
    assert calls_of(llama.message) == [("weather", {"city": "Oslo"})]


def test_each_format_reads_back_the_call_it_renders():
    for fmt in (HERMES, MISTRAL, LLAMA3):
        text = "ok " + fmt.render_call("files_read", '{"path": "a b.txt"}')
        assert calls_of(fmt.parse(text).message) == [("files_read", {"path": "a b.txt"})], fmt


def test_the_format_is_chosen_with_the_template():
    assert format_for_template(None, True) is HERMES
    assert format_for_template("{{ '[TOOL_CALLS]' }} tools", False) is MISTRAL
    assert format_for_template("<|python_tag|> tools", False) is LLAMA3
    assert format_for_template("<tool_call> tools", False) is HERMES


def test_malformed_calls_become_observations_for_the_model():
    def read(path: str) -> str:
        """Read a file."""
        return path

    toolbox = Toolbox([function_tool(read)])
    cases = {
        f'{OPEN}{{"name": "read", "arguments": {{"path": "a"{CLOSE}': "not valid JSON",
        f'{OPEN}{{"name": "write", "arguments": {{}}}}{CLOSE}': "no tool named 'write'",
        f'{OPEN}{{"name": "read", "arguments": {{"path": 3}}}}{CLOSE}': "invalid arguments",
        f'{OPEN}{{"name": "read", "arguments": [1]}}{CLOSE}': "must be a JSON object",
    }
    for text, expected in cases.items():
        [call] = parse_output(text).tool_calls or []
        args, problem = check_call(call, toolbox)
        assert args is None and problem is not None and expected in problem, (text, problem)


# --- fuzzing -------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,20}", fullmatch=True)
arguments = st.dictionaries(st.text(max_size=8), json_values, max_size=4)


def pieces(*extra: str, max_size: int = 12) -> st.SearchStrategy[str]:
    """Text made of random characters and the given fragments."""
    return st.lists(st.text(max_size=4) | st.sampled_from(extra), max_size=max_size).map("".join)


# Text that contains no tag, though it may contain '<', '{' and pieces of tags.
plain = pieces("<", "tool", "_call", ">", "{", "}").filter(
    lambda t: OPEN not in t and CLOSE not in t
)


@settings(max_examples=300, deadline=None)
@given(pieces(OPEN, CLOSE, "{", "}", '"name": "x"', '"arguments": ', '"', "[", "]", max_size=20))
def test_never_raises(text: str):
    message = parse_output(text)
    assert isinstance(message, AssistantMessage)
    for call in message.tool_calls or []:
        assert isinstance(call.function.name, str) and isinstance(call.function.arguments, str)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(plain, names, arguments, st.booleans()), min_size=1, max_size=3),
    plain,
    st.booleans(),
)
def test_well_formed_calls_round_trip_and_text_is_kept(
    parts: list[tuple[str, str, dict[str, Any], bool]], tail: str, close_last: bool
):
    text = ""
    for i, (before, name, args, as_string) in enumerate(parts):
        encoded: Any = json.dumps(args) if as_string else args
        block = json.dumps({"name": name, "arguments": encoded})
        last = i == len(parts) - 1
        text += before + OPEN + "\n" + block + "\n" + (CLOSE if close_last or not last else "")
    if close_last:
        text += tail
    message = parse_output(text)
    assert calls_of(message) == [(name, args) for _, name, args, _ in parts]
    outside = "".join(before for before, *_ in parts) + (tail if close_last else "")
    assert (message.content or "") == outside.strip()


@settings(max_examples=200, deadline=None)
@given(plain)
def test_text_without_calls_is_kept_whole(text: str):
    message = parse_output(text)
    if not message.tool_calls:
        assert message.content == text.strip()


def test_tool_call_model_round_trip():
    call = ToolCall.make("read", {"path": "x"})
    body = {"name": "read", "arguments": json.loads(call.function.arguments)}
    text = f"{OPEN}{json.dumps(body)}{CLOSE}"
    assert calls_of(parse_output(text)) == [("read", {"path": "x"})]
