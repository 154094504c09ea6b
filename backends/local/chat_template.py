"""Chat templates: turn a conversation into the prompt text a local model was trained on.

The model's own Jinja template (from GGUF metadata or a Hugging Face ``tokenizer_config.json``)
is rendered in Jinja's sandbox, since a template is untrusted input, with the helpers Hugging
Face's ``apply_chat_template`` provides (``raise_exception``, ``strftime_now``, ``tojson``).
Messages are passed as OpenAI wire dicts, except that tool-call arguments are decoded to
objects, as templates written for ``apply_chat_template`` expect (they apply ``| tojson``).

A template that never mentions ``tools`` (SmolLM2's) cannot show tools, tool calls or tool
results. Then, and when there is no template at all, the conversation is rendered with the
built-in ChatML template ``templates/chatml_tools.jinja`` (Hermes / Qwen2.5 style):

- the tools go into the system turn as JSON schemas;
- an assistant tool call is ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``;
- each tool result is its own ``user`` turn holding ``<tool_response>\\n...\\n</tool_response>``.

Both renderings are stable: each earlier turn renders to the same text whatever follows it,
so the prompt of turn k is a prefix of the prompt of turn k+1 and prefix caching works.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from agent.errors import UserError
from agent.messages import AssistantMessage, Message, ToolSpec
from backends.local.tool_format import ToolCallFormat, format_for_template

BUILTIN_TEMPLATE = "chatml_tools.jinja"
CHATML_END = "<|im_end|>"
# End-of-turn markers of common template families; any that a template writes is a stop string.
_END_MARKERS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")


class ChatTemplate:
    """A model's chat template, rendered in a sandbox, with a built-in ChatML fallback for tools."""

    def __init__(self, source: str | None, bos_token: str = "", eos_token: str = "") -> None:
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self._own = _compile(source, "the model's chat template") if source else None
        self.supports_tools = bool(source) and _mentions_tools(source or "")

    @classmethod
    def from_gguf(cls, path: Path) -> ChatTemplate:
        """The template and BOS/EOS strings stored in a GGUF file's metadata."""
        from backends.gguf.model_info import gguf_tokenizer_strings

        meta = gguf_tokenizer_strings(Path(path))
        return cls(meta.get("chat_template"), meta.get("bos_token", ""), meta.get("eos_token", ""))

    @classmethod
    def from_hf_folder(cls, path: Path) -> ChatTemplate:
        """The template of a Hugging Face model folder (``tokenizer_config.json``)."""
        folder = Path(path)
        config_file = folder / "tokenizer_config.json"
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(
                f"{folder} has no tokenizer_config.json: is it a model folder?"
            ) from None
        except json.JSONDecodeError as exc:
            raise UserError(
                f"{config_file} is not valid JSON (line {exc.lineno}: {exc.msg})"
            ) from None
        source = _pick_template(config.get("chat_template"))
        jinja_file = folder / "chat_template.jinja"  # newer folders keep it in its own file
        if source is None and jinja_file.is_file():
            source = jinja_file.read_text(encoding="utf-8")
        return cls(
            source, _token_text(config.get("bos_token")), _token_text(config.get("eos_token"))
        )

    @property
    def uses_builtin(self) -> bool:
        """True when conversations with tools are rendered with the built-in ChatML template."""
        return self._own is None or not self.supports_tools

    @property
    def tool_format(self) -> ToolCallFormat:
        """The format tool calls are written in with this template (parsed back the same way)."""
        return format_for_template(self.source, self.uses_builtin)

    @property
    def stop_strings(self) -> list[str]:
        """Texts that end the assistant's turn (the end marker and the EOS token)."""
        stops: list[str] = []
        text = self.source or ""
        if self.uses_builtin:
            stops.append(CHATML_END)
        stops += [m for m in _END_MARKERS if m in text and m not in stops]
        if self.eos_token and self.eos_token not in stops:
            stops.append(self.eos_token)
        return stops

    def render(
        self,
        messages: Sequence[Message],
        tools: list[ToolSpec] | None = None,
        add_generation_prompt: bool = True,
    ) -> str:
        """The prompt text for ``messages`` (and ``tools``), ending with the assistant's header."""
        wire = [template_message(m) for m in messages]
        tool_dicts = [t.to_wire() for t in tools] if tools else None
        needs_tools = bool(tool_dicts) or any(_is_tool_turn(m) for m in messages)
        template = self._own
        if template is None or (needs_tools and not self.supports_tools):
            template = _builtin()
        context: dict[str, Any] = {
            "messages": wire,
            "add_generation_prompt": add_generation_prompt,
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
        }
        if tool_dicts:
            context["tools"] = tool_dicts
        # The template is data we did not write: its failure is the user's to fix.
        try:
            return str(template.render(**context))
        except UserError:
            raise
        except Exception as exc:
            raise UserError(
                f"the chat template failed to render this conversation: {exc}"
            ) from None


def template_message(message: Message) -> dict[str, Any]:
    """A message as a dict for a chat template: wire format, tool-call arguments decoded."""
    data = message.to_wire()
    if data.get("content") is None:
        data["content"] = ""  # templates concatenate content; null would fail
    if isinstance(message, AssistantMessage) and message.tool_calls:
        calls = []
        for call in message.tool_calls:
            wire = call.to_wire()
            # Text that is not JSON stays as the model wrote it.
            with contextlib.suppress(json.JSONDecodeError):
                wire["function"]["arguments"] = json.loads(call.function.arguments or "{}")
            calls.append(wire)
        data["tool_calls"] = calls
    return data


def _is_tool_turn(message: Message) -> bool:
    return message.role == "tool" or bool(getattr(message, "tool_calls", None))


def _raise_exception(message: str) -> None:
    from jinja2.exceptions import TemplateError

    raise TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # Like Hugging Face's: no HTML escaping (Jinja's own tojson escapes <, > and &).
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


@lru_cache(maxsize=1)
def _environment() -> Any:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


@lru_cache(maxsize=32)
def _compile(source: str, what: str) -> Any:
    from jinja2.exceptions import TemplateSyntaxError

    try:
        return _environment().from_string(source)
    except TemplateSyntaxError as exc:
        raise UserError(f"{what} is not valid Jinja (line {exc.lineno}: {exc.message})") from None


def _mentions_tools(source: str) -> bool:
    from jinja2 import meta
    from jinja2.exceptions import TemplateSyntaxError

    try:
        return "tools" in meta.find_undeclared_variables(_environment().parse(source))
    except TemplateSyntaxError:
        return False


@lru_cache(maxsize=1)
def builtin_source() -> str:
    """The text of the built-in ChatML-with-tools template."""
    return (resources.files("backends.local") / "templates" / BUILTIN_TEMPLATE).read_text(
        encoding="utf-8"
    )


def _builtin() -> Any:
    return _compile(builtin_source(), "the built-in chat template")


def _pick_template(value: Any) -> str | None:
    """``chat_template`` is a string, or a list of named templates (take "default")."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        chosen = named.get("default") or next(iter(named.values()), None)
        return chosen if isinstance(chosen, str) else None
    return None


def _token_text(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""
