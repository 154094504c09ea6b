"""An HTTP request body to what the engine runs: messages, template, tokens, params, grammar.

Every check of the client's input happens here, before anything is queued, so a mistake is a
4xx with the OpenAI error shape and the engine never sees it. The steps themselves are the
shared server-side ones: ``ChatTemplate.render`` for the prompt and the engine's tool-call
grammar for ``tools``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
from pydantic import ValidationError

from agent.errors import UserError
from agent.messages import AssistantMessage, Message, ToolMessage, ToolSpec, parse_message
from backends.engine.backend import LoadedEngine
from backends.engine.core.params import SamplingParams
from backends.engine.serve.protocol import (
    APIError,
    ChatCompletionRequest,
    CompletionRequest,
    NamedToolChoice,
    validation_error,
)
from backends.engine.serve.structured import JsonConstraints
from backends.local.tool_format import HERMES, ToolCallFormat

# OpenAI's default when a request leaves temperature unset.
DEFAULT_TEMPERATURE = 1.0


@dataclass(slots=True)
class Prepared:
    """One request, checked and ready for the engine."""

    prompt_ids: list[int]
    params: SamplingParams
    constraint: Any
    parse_tool_calls: bool  # tools were offered and the output is not forced to be JSON
    tool_format: ToolCallFormat = HERMES  # how the model's template writes tool calls


@dataclass(frozen=True, slots=True)
class DraftDefaults:
    """Tokens drafted per step for a request whose body leaves ``num_speculative_tokens``
    unset: under a grammar (tools or a JSON response_format, whose forced text rides in the
    drafts) and for plain text."""

    under_grammar: int = 0
    plain: int = 0


class RequestBuilder:
    """Checks bodies and turns them into :class:`Prepared` requests for one loaded model."""

    def __init__(
        self, loaded: LoadedEngine, model_ids: set[str], drafts: DraftDefaults | None = None
    ) -> None:
        self.loaded = loaded
        self.model_ids = model_ids
        self.drafts = drafts or DraftDefaults()
        self.max_model_len = loaded.engine.max_model_len
        self._json: JsonConstraints | None = None

    def check_model(self, model: str) -> None:
        if model not in self.model_ids:
            raise APIError(
                f"The model `{model}` does not exist: GET /v1/models lists the one served here.",
                404,
                "model",
                "model_not_found",
            )

    async def chat(self, body: ChatCompletionRequest) -> Prepared:
        """Validate a chat request and render, tokenize and constrain it."""
        self.check_model(body.model)
        messages = [_message(i, raw) for i, raw in enumerate(body.messages)]
        _check_tool_history(messages)
        tools = _offered_tools(body)
        template = self.loaded.template
        try:
            prompt = template.render(messages, tools=tools, add_generation_prompt=True)
        except UserError as exc:
            raise APIError(exc.message, param="messages") from None
        ids = self.loaded.tokenizer.encode(prompt)
        stop = [*template.stop_strings, *body.stop_list()]
        params = self._params(body, ids, stop, body.token_limit)
        json_format = body.response_format is not None and body.response_format.type != "text"
        constraint = None
        if json_format:
            constraint = await anyio.to_thread.run_sync(self._json_constraint, body)
        elif tools:
            required = body.tool_choice == "required" or isinstance(
                body.tool_choice, NamedToolChoice
            )
            factory = self.loaded.constraints
            constraint = await anyio.to_thread.run_sync(
                lambda: factory.for_tools(tools, required=required, fmt=template.tool_format)
            )
        if constraint is not None and body.num_speculative_tokens is None:
            params.num_speculative_tokens = self.drafts.under_grammar
        return Prepared(
            ids, params, constraint, bool(tools) and not json_format, template.tool_format
        )

    def completion(self, body: CompletionRequest) -> Prepared:
        """Validate a plain completion request and tokenize its prompt."""
        self.check_model(body.model)
        prompt = body.prompt
        if isinstance(prompt, list) and all(isinstance(p, int) for p in prompt):
            ids = [int(p) for p in prompt]
            runner: Any = self.loaded.engine.runner
            vocab = int(runner.config.vocab_size)
            if any(not 0 <= i < vocab for i in ids):
                raise APIError(f"prompt token ids must be in [0, {vocab})", param="prompt")
        else:
            if isinstance(prompt, list):
                if len(prompt) != 1:
                    raise APIError("send one prompt per request", param="prompt")
                prompt = str(prompt[0])
            ids = self.loaded.tokenizer.encode(str(prompt))
        params = self._params(body, ids, body.stop_list(), body.max_tokens)
        return Prepared(ids, params, None, False)

    def _params(
        self, body: Any, ids: list[int], stop: list[str], max_tokens: int | None
    ) -> SamplingParams:
        limit = self.max_model_len
        if not ids:
            raise APIError("the prompt is empty", param="messages")
        if len(ids) >= limit:
            raise APIError(
                f"This model's maximum context length is {limit} tokens. However, your prompt "
                f"has {len(ids)} tokens: shorten the messages.",
                param="messages",
                code="context_length_exceeded",
            )
        if max_tokens is not None and max_tokens > limit:
            raise APIError(
                f"max_tokens is {max_tokens} but this model's maximum context length is {limit}"
                f" tokens (the prompt has {len(ids)}): ask for at most {limit - len(ids)}.",
                param="max_tokens",
                code="invalid_value",
            )
        params = SamplingParams(
            temperature=DEFAULT_TEMPERATURE if body.temperature is None else body.temperature,
            top_k=max(0, body.top_k or 0),
            top_p=1.0 if body.top_p is None else body.top_p,
            min_p=body.min_p or 0.0,
            seed=body.seed,
            max_tokens=max_tokens or (limit - len(ids)),
            stop_strings=[s for s in stop if s],
            num_speculative_tokens=self.drafts.plain
            if body.num_speculative_tokens is None
            else body.num_speculative_tokens,
        )
        try:
            params.check()
        except UserError as exc:
            raise APIError(exc.message) from None
        return params

    def _json_constraint(self, body: ChatCompletionRequest) -> Any:
        if self._json is None:
            self._json = JsonConstraints(self.loaded.constraints)
        fmt = body.response_format
        schema = None
        if fmt is not None and fmt.type == "json_schema":
            if fmt.json_schema is None:
                raise APIError(
                    "response_format of type json_schema needs a json_schema object",
                    param="response_format",
                )
            schema = fmt.json_schema.json_schema
            _check_schema(schema, "response_format.json_schema.schema")
        return self._json.for_schema(schema)


def _message(index: int, raw: dict[str, Any]) -> Message:
    """One wire message; text content parts are joined, as a text-only model needs."""
    data = dict(raw)
    content = data.get("content")
    if isinstance(content, list):
        texts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text"):
                raise APIError(
                    "only text content parts are supported by this model",
                    param=f"messages[{index}].content",
                )
            texts.append(str(part.get("text", "")))
        data["content"] = "".join(texts)
    try:
        return parse_message(data)
    except ValidationError as exc:
        err = validation_error(exc)
        suffix = f".{err.param}" if err.param else ""
        raise APIError(
            f"messages[{index}] is not a valid message: {exc.errors()[0]['msg']}",
            param=f"messages[{index}]{suffix}",
            code="invalid_value",
        ) from None


def _check_tool_history(messages: list[Message]) -> None:
    """Every tool result answers a call made earlier in the conversation."""
    called: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            called.update(call.id for call in message.tool_calls or [])
        elif isinstance(message, ToolMessage) and message.tool_call_id not in called:
            raise APIError(
                f"messages[{index}] answers tool call {message.tool_call_id!r}, but no earlier "
                "assistant message made that call",
                param=f"messages[{index}].tool_call_id",
                code="invalid_value",
            )


def _offered_tools(body: ChatCompletionRequest) -> list[ToolSpec] | None:
    """The tools the model may call under ``tool_choice``."""
    choice = body.tool_choice
    if choice not in (None, "auto", "none") and not body.tools:
        raise APIError("tool_choice needs tools: send the tools list", param="tool_choice")
    if not body.tools or choice == "none":
        return None
    names = [t.function.name for t in body.tools]
    if len(set(names)) != len(names):
        raise APIError("two tools have the same name", param="tools")
    for index, tool in enumerate(body.tools):
        _check_schema(tool.function.parameters, f"tools[{index}].function.parameters")
    if isinstance(choice, NamedToolChoice):
        chosen = [t for t in body.tools if t.function.name == choice.function.name]
        if not chosen:
            raise APIError(
                f"tool_choice names {choice.function.name!r}, which is not in tools",
                param="tool_choice",
            )
        return chosen
    return list(body.tools)


def _check_schema(schema: dict[str, Any], param: str) -> None:
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        raise APIError(f"{param} is not a valid JSON schema: {exc.message}", param=param) from None
