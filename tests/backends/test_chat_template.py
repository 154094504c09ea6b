"""Chat templates: sandboxed rendering, the built-in ChatML with tools, and stable prefixes."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.errors import UserError
from agent.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from backends.local.chat_template import ChatTemplate, builtin_source, template_message
from backends.local.tool_format import HERMES

# A tool-aware template in the style of Qwen2.5's: tools as JSON, arguments through `| tojson`
# (so they must arrive decoded), consecutive tool results grouped into one user turn.
TOOL_AWARE = """
{%- if tools %}<|im_start|>system
{{ messages[0].content if messages[0].role == 'system' else 'Helper.' }}
<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'user' or (m.role == 'assistant' and not m.tool_calls) %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% elif m.role == 'assistant' %}<|im_start|>assistant
{{ m.content }}{% for c in m.tool_calls %}<tool_call>{"name": "{{ c.function.name }}", \
"arguments": {{ c.function.arguments | tojson }}}</tool_call>{% endfor %}<|im_end|>
{% elif m.role == 'tool' %}
{%- if loop.previtem is undefined or loop.previtem.role != 'tool' %}<|im_start|>user{% endif %}
{{ '\n' }}<tool_response>{{ m.content }}</tool_response>
{%- if loop.nextitem is undefined or loop.nextitem.role != 'tool' %}<|im_end|>
{% endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


def generation_points(conversation: list[Message]) -> list[int]:
    """The k for which the model generated conversation[k] after seeing conversation[:k]."""
    return [k for k, m in enumerate(conversation) if m.role == "assistant"]


def test_builtin_renders_tools_calls_and_results(
    conversation: list[Message], tools: list[ToolSpec]
):
    text = ChatTemplate(None).render(conversation, tools)
    assert text.startswith("<|im_start|>system\nYou are a careful assistant.\n\n# Tools")
    for tool in tools:
        assert json.dumps(tool.to_wire()) in text
    assert '<tool_call>\n{"name": "weather", "arguments": {"city": "Oslo"}}\n</tool_call>' in text
    assert "<|im_start|>user\n<tool_response>\nrain, 9 °C\n</tool_response><|im_end|>\n" in text
    assert "Now read notes.txt <please>." in text  # no HTML escaping anywhere
    assert text.endswith("<|im_start|>assistant\n")
    assert text.count("<|im_start|>system") == 1


def test_builtin_tool_calls_parse_back(conversation: list[Message], tools: list[ToolSpec]):
    """What the template shows as the assistant's turn is what the parser reads as that turn."""
    text = ChatTemplate(None).render(conversation, tools)
    turns = text.split("<|im_start|>assistant\n")[1:-1]
    replies = [m for m in conversation if isinstance(m, AssistantMessage)]
    assert len(turns) == len(replies)
    for turn, reply in zip(turns, replies, strict=True):
        parsed = HERMES.parse(turn.split("<|im_end|>")[0]).message
        assert parsed.content == reply.content
        got = [(c.function.name, json.loads(c.function.arguments)) for c in parsed.tool_calls or []]
        want = [(c.function.name, json.loads(c.function.arguments)) for c in reply.tool_calls or []]
        assert got == want


@pytest.mark.parametrize("source", [None, TOOL_AWARE], ids=["builtin", "tool-aware"])
def test_prompt_of_each_turn_is_a_prefix_of_the_next(
    source: str | None, conversation: list[Message], tools: list[ToolSpec]
):
    template = ChatTemplate(source)
    full = template.render(conversation, tools, add_generation_prompt=False)
    for k in generation_points(conversation):
        prompt = template.render(conversation[:k], tools, add_generation_prompt=True)
        after = template.render(conversation[: k + 1], tools, add_generation_prompt=False)
        assert after.startswith(prompt), f"turn {k} re-renders differently"
        assert full.startswith(after)


def test_builtin_every_message_is_a_prefix(conversation: list[Message], tools: list[ToolSpec]):
    """One turn per message (tool results too), so even between tool results nothing moves."""
    template = ChatTemplate(None)
    # From k=1: the system message and the tool list share the first turn.
    renders = [
        template.render(conversation[:k], tools, False) for k in range(1, len(conversation) + 1)
    ]
    for shorter, longer in itertools.pairwise(renders):
        assert longer.startswith(shorter) and len(longer) > len(shorter)


def test_bundled_template_plain_chat_prefixes(bundled_model: Path):
    template = ChatTemplate.from_gguf(bundled_model)
    chat: list[Message] = [
        UserMessage(content="Hi"),
        AssistantMessage(content="Hello! How can I help?"),
        UserMessage(content="What is 2+2?"),
        AssistantMessage(content="4"),
    ]
    for k in generation_points(chat):
        prompt = template.render(chat[:k])
        assert template.render(chat[: k + 1], add_generation_prompt=False).startswith(prompt)
    # SmolLM2's own template adds its default system prompt when there is none.
    assert template.render(chat).startswith("<|im_start|>system\nYou are a helpful AI assistant")


def test_bundled_template_without_tool_support_uses_builtin(
    bundled_model: Path, conversation: list[Message], tools: list[ToolSpec]
):
    template = ChatTemplate.from_gguf(bundled_model)
    assert template.source and not template.supports_tools
    assert template.bos_token == "<|im_start|>" and template.eos_token == "<|im_end|>"
    assert template.stop_strings == ["<|im_end|>"]
    assert template.render(conversation, tools) == ChatTemplate(None).render(conversation, tools)
    # Without tools, the model's own template is used.
    plain: list[Message] = [SystemMessage(content="S"), UserMessage(content="U")]
    assert (
        template.render(plain)
        == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    )


def test_tool_aware_template_gets_decoded_arguments(
    conversation: list[Message], tools: list[ToolSpec]
):
    text = ChatTemplate(TOOL_AWARE).render(conversation, tools)
    assert '<tool_call>{"name": "read", "arguments": {"path": "notes.txt"}}</tool_call>' in text
    assert "<tool_response>sunny, 21 °C</tool_response>\n<tool_response>rain, 9 °C" in text


def test_helpers_like_hugging_face():
    source = (
        "{% if messages|length > 1 %}{{ raise_exception('only one message, please') }}{% endif %}"
        "{{ strftime_now('%Y') }}|{{ {'a': '<b>'} | tojson }}|{{ bos_token }}{{ eos_token }}"
    )
    template = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
    year, obj, tokens = template.render([UserMessage(content="x")]).split("|")
    assert year.isdigit() and len(year) == 4
    assert obj == '{"a": "<b>"}'
    assert tokens == "<s></s>"
    with pytest.raises(UserError, match="only one message, please"):
        template.render([UserMessage(content="x"), UserMessage(content="y")])


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{% set xs = [] %}{{ xs.append(1) }}",
        "{{ messages[0].__class__ }}{{ cycler.__init__.__globals__ }}",
    ],
)
def test_templates_are_sandboxed(source: str):
    with pytest.raises(UserError, match="chat template failed"):
        ChatTemplate(source).render([UserMessage(content="x")])


def test_invalid_template_is_a_user_error():
    with pytest.raises(UserError, match="not valid Jinja"):
        ChatTemplate("{% for m in messages %}")


def test_from_hf_folder(tmp_path: Path):
    config = {
        "chat_template": [
            {"name": "tool_use", "template": "T"},
            {"name": "default", "template": "D"},
        ],
        "bos_token": {"content": "<s>", "lstrip": False},
        "eos_token": "</s>",
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    template = ChatTemplate.from_hf_folder(tmp_path)
    assert (template.source, template.bos_token, template.eos_token) == ("D", "<s>", "</s>")
    assert "</s>" in template.stop_strings
    (tmp_path / "tokenizer_config.json").write_text("{}")
    (tmp_path / "chat_template.jinja").write_text("J")
    assert ChatTemplate.from_hf_folder(tmp_path).source == "J"
    with pytest.raises(UserError, match=r"no tokenizer_config\.json"):
        ChatTemplate.from_hf_folder(tmp_path / "missing")


def test_from_gguf_rejects_other_files(tmp_path: Path):
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"not a model")
    with pytest.raises(UserError, match="not a GGUF"):
        ChatTemplate.from_gguf(bogus)


def test_builtin_template_is_package_data():
    assert "<tool_call>" in builtin_source() and "<tool_response>" in builtin_source()


@pytest.mark.parametrize("source", [TOOL_AWARE, None], ids=["tool-aware", "builtin"])
def test_same_text_as_hugging_face(
    source: str | None, conversation: list[Message], tools: list[ToolSpec]
):
    """Hugging Face's renderer, given the same message dicts, writes the same prompt."""
    hf = pytest.importorskip("transformers.utils.chat_template_utils")
    template = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
    ours = template.render(conversation, tools)
    theirs = hf.render_jinja_template(
        conversations=[[template_message(m) for m in conversation]],
        tools=[t.to_wire() for t in tools],
        chat_template=source or builtin_source(),
        add_generation_prompt=True,
        bos_token="<s>",
        eos_token="</s>",
    )
    rendered = theirs[0] if isinstance(theirs, tuple) else theirs
    assert ours == (rendered[0] if isinstance(rendered, list) else rendered)


_text = st.lists(
    st.text(max_size=5) | st.sampled_from(["{{ 7*7 }}", "{%", "<|im_end|>", "\n"]), max_size=6
).map("".join)
_args = st.dictionaries(st.text(max_size=6), st.integers() | st.text(max_size=6), max_size=3)
_message = st.one_of(
    st.builds(UserMessage, content=_text),
    st.builds(AssistantMessage, content=_text),
    st.builds(
        lambda text, calls: AssistantMessage(
            content=text or None, tool_calls=[ToolCall.make(n, a) for n, a in calls]
        ),
        st.text(max_size=10),
        st.lists(st.tuples(st.sampled_from(["weather", "read"]), _args), min_size=1, max_size=2),
    ),
    st.builds(ToolMessage, tool_call_id=st.just("c"), content=_text),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tail=st.lists(_message, min_size=1, max_size=6), with_system=st.booleans())
def test_builtin_prefixes_hold_for_any_conversation(
    tools: list[ToolSpec], tail: list[Message], with_system: bool
):
    conversation: list[Message] = [SystemMessage(content="S")] if with_system else []
    conversation += [UserMessage(content="start"), *tail]
    template = ChatTemplate(None)
    renders = [
        template.render(conversation[:k], tools, False) for k in range(1, len(conversation) + 1)
    ]
    for shorter, longer in itertools.pairwise(renders):
        assert longer.startswith(shorter)
    # Message text is data, never template code.
    for message in conversation:
        assert (message.content or "") in renders[-1]


def test_builtin_template_writes_calls_in_the_hermes_layout():
    """The built-in template is plain Jinja (Hugging Face renders it too), so it spells the
    call layout out itself; it must be exactly the format's own rendering."""
    call = AssistantMessage(
        content=None, tool_calls=[ToolCall.make("files_read", {"path": "ä b.txt", "limit": 3})]
    )
    text = ChatTemplate(None).render([UserMessage(content="q"), call], add_generation_prompt=False)
    expected = HERMES.render_call("files_read", '{"path": "ä b.txt", "limit": 3}')
    assert f"<|im_start|>assistant\n{expected}<|im_end|>" in text
