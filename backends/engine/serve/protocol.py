"""The OpenAI HTTP API's request bodies and error shape, validated at the edge with pydantic.

Fields clients commonly send that change nothing here (``user``, ``logprobs: false``,
penalties of 0, ...) are accepted and ignored, as vLLM does; what the server cannot honour
(``n`` > 1) is refused with a 400 that names the field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.messages import ToolSpec


class APIError(Exception):
    """A client mistake, sent as ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(
        self,
        message: str,
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
        type: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param
        self.code = code
        self.type = type

    def body(self) -> dict[str, Any]:
        """The JSON body OpenAI's clients parse."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def validation_error(exc: ValidationError) -> APIError:
    """The first problem pydantic found, as a 400 naming the field (``messages[2].content``)."""
    err = exc.errors()[0]
    param = ""
    for part in err["loc"]:
        param += f"[{part}]" if isinstance(part, int) else (f".{part}" if param else str(part))
    where = f" at {param!r}" if param else ""
    return APIError(f"invalid request{where}: {err['msg']}", 400, param or None, "invalid_value")


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class StreamOptions(_Body):
    """``stream_options``: only ``include_usage`` changes anything."""

    include_usage: bool = False


class NamedFunction(_Body):
    name: str


class NamedToolChoice(_Body):
    """``{"type": "function", "function": {"name": ...}}``: call exactly this tool."""

    type: Literal["function"] = "function"
    function: NamedFunction


class JsonSchemaFormat(_Body):
    name: str = "response"
    # "schema" is a BaseModel attribute name, hence the alias.
    json_schema: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None


class ResponseFormat(_Body):
    """``text``, ``json_object`` (any JSON object) or ``json_schema`` (JSON valid for a schema)."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class _Sampling(_Body):
    model: str
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=-1)  # -1 and 0 both mean off, as in vLLM
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    # clawloop's extension: prompt-lookup speculative decoding, up to this many drafted tokens
    # per step (0 or unset: off).
    num_speculative_tokens: int | None = Field(default=None, ge=0, le=16)
    max_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int = Field(default=1, ge=1, le=1)
    stream: bool = False
    stream_options: StreamOptions | None = None

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatCompletionRequest(_Sampling):
    """``POST /v1/chat/completions``; ``messages`` are checked one by one afterwards."""

    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[ToolSpec] | None = None
    tool_choice: Literal["auto", "none", "required"] | NamedToolChoice | None = None
    max_completion_tokens: int | None = Field(default=None, ge=1)
    response_format: ResponseFormat | None = None

    @property
    def token_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class CompletionRequest(_Sampling):
    """``POST /v1/completions``: one prompt, as text or token ids."""

    prompt: str | list[str] | list[int]
    max_tokens: int | None = Field(default=16, ge=1)  # OpenAI's default for this endpoint
