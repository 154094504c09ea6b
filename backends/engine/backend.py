"""The engine as a clawloop backend: a :class:`Decoder` over a shared :class:`LLMEngine`.

Every conversation in the process submits to the same engine, so concurrent agents share each
forward pass, and a conversation's next turn finds its earlier turns in the prefix cache.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.errors import ConfigError, UserError
from agent.messages import ChatRequest, ToolSpec, Usage
from backends.engine.core.engine_config import EngineConfig
from backends.engine.core.llm_engine import GenerationDelta, LLMEngine
from backends.engine.core.params import SamplingParams
from backends.local.tool_format import HERMES, ToolCallFormat

if TYPE_CHECKING:
    from backends.base import DecodeResult, LocalBackend
    from backends.engine.config import EngineSettings
    from backends.local.chat_template import ChatTemplate

ENGINE_INSTALL_HINT = "pip install 'clawloop[engine]'"
# Agents want reproducible tool calls: greedy unless the request asks for a temperature.
DEFAULT_TEMPERATURE = 0.0
DEFAULT_MAX_TOKENS = 1024

# (model, device, dtype, weights, KV dtype, adapter) -> the engine loaded for them
_engines: dict[tuple[str, ...], LoadedEngine] = {}
_engines_lock = threading.Lock()


def sampling_params_for(
    request: ChatRequest, stop: list[str], num_speculative_tokens: int = 0
) -> SamplingParams:
    """The request's decoding settings, with agent-friendly defaults for what it leaves unset."""
    return SamplingParams(
        temperature=DEFAULT_TEMPERATURE if request.temperature is None else request.temperature,
        top_k=request.top_k or 0,
        top_p=1.0 if request.top_p is None else request.top_p,
        min_p=request.min_p or 0.0,
        seed=request.seed,
        max_tokens=request.max_tokens or DEFAULT_MAX_TOKENS,
        stop_strings=[s for s in stop if s],
        num_speculative_tokens=num_speculative_tokens,
    )


class EngineDecoder:
    """Prefill + decode through the engine; tool calls are constrained when tools are offered."""

    def __init__(
        self,
        engine: LLMEngine,
        tokenizer: Any,
        constraints: Any | None = None,
        tool_format: ToolCallFormat = HERMES,
        num_speculative_tokens: int = 0,
    ) -> None:
        self.engine = engine
        self.num_speculative_tokens = num_speculative_tokens
        self.tokenizer = tokenizer
        self.constraints = constraints  # a ConstraintFactory, or None to decode unconstrained
        self.tool_format = tool_format

    @property
    def supports_response_format(self) -> bool:
        """A response_format is a grammar, so only a decoder with a grammar factory has it."""
        return hasattr(self.constraints, "for_schema")

    def decode(
        self, prompt: str, request: ChatRequest, stop: list[str], tools: list[ToolSpec] | None
    ) -> Iterator[str | DecodeResult]:
        from backends.base import DecodeResult

        params = sampling_params_for(request, stop, self.num_speculative_tokens)
        constraint = None
        if request.response_format is not None and self.constraints is not None:
            constraint = self.constraints.for_schema(request.response_format.output_schema())
        elif tools and self.constraints is not None:
            required = request.tool_choice == "required"
            constraint = self.constraints.for_tools(tools, required=required, fmt=self.tool_format)
        stream = self.engine.submit(self.tokenizer.encode(prompt), params, constraint)
        try:
            for item in stream:
                if isinstance(item, GenerationDelta):
                    if item.text:
                        yield item.text
                else:
                    usage = Usage(
                        prompt_tokens=item.prompt_tokens,
                        completion_tokens=item.completion_tokens,
                        cached_tokens=item.cached_tokens,
                    )
                    yield DecodeResult(finish_reason=item.finish_reason, usage=usage)
        finally:
            stream.close()  # a consumer that stops early aborts the request


@dataclass(slots=True)
class LoadedEngine:
    """One loaded model and what serving it needs: the engine, grammar factory and template."""

    path: Path
    engine: LLMEngine
    constraints: Any  # a ConstraintFactory
    template: ChatTemplate
    adapter: Path | None = None  # the LoRA adapter merged into the weights
    device: str = "cpu"  # where the engine runs: "cpu", "cuda", "cuda:N"

    @property
    def tokenizer(self) -> Any:
        return self.engine.runner.tokenizer


def load_engine(
    model: str | None = None, adapter: str | None = None, **options: object
) -> LoadedEngine:
    """The shared engine for ``model`` (default: the bundled GGUF) with ``options`` as settings.

    One engine per (model, device, dtype, weights, KV dtype, adapter) per process: the first
    call loads the model and sizes its KV cache; later calls reuse it. ``options`` are
    :class:`EngineSettings` keys (others are ignored), read here once into the
    :class:`EngineConfig` the engine is built from.
    ``adapter`` is a GGUF LoRA file, merged into the weights at load: unset, the shipped
    adapter for the bundled model (if the package holds one); "none", no adapter.
    """
    from backends.engine.config import EngineSettings
    from backends.gguf.default_model import default_adapter, default_model_path
    from backends.gguf.lora import adapter_path
    from backends.local.chat_template import ChatTemplate

    settings = EngineSettings.from_options(dict(options))
    try:
        import torch
    except ImportError:
        raise UserError(f"the bundled engine needs torch: run {ENGINE_INSTALL_HINT}") from None
    path = Path(model).expanduser() if model else default_model_path()
    if not path.exists():
        raise UserError(f"model {path} does not exist: pass a .gguf file or a Hugging Face folder")
    _check_dtype(settings.dtype)
    device = settings.device or ("cuda" if torch.cuda.is_available() else "cpu")
    config = engine_config(settings, path, adapter_path(adapter, default_adapter(path)), device)
    # The first call's settings size the engine; later calls for the model share it as it is.
    key = (
        str(path.resolve()),
        config.device,
        config.dtype or "",
        config.weights or "",
        config.kv_dtype or "",
        str(config.adapter or ""),
    )
    with _engines_lock:
        if key not in _engines:
            engine, constraints = _load_engine(path, config)
            tokenizer = engine.runner.tokenizer
            template = ChatTemplate(
                source=tokenizer.chat_template,
                bos_token=tokenizer.bos_token,
                eos_token=tokenizer.eos_token,
            )
            _engines[key] = LoadedEngine(
                path, engine, constraints, template, config.adapter, config.device
            )
        return _engines[key]


def engine_config(
    settings: EngineSettings, model: Path, adapter: Path | None, device: str
) -> EngineConfig:
    """``settings`` resolved for ``model`` (with ``adapter``) on ``device``: what the engine is
    built from. Every setting that :class:`EngineConfig` has a field of the same name for is
    carried over as it is, so a new engine setting needs no line here."""
    shared = {f.name for f in fields(EngineConfig)} & set(type(settings).model_fields)
    values: dict[str, Any] = {name: getattr(settings, name) for name in shared}
    values |= {
        "model": model,
        "adapter": adapter,
        "device": device,
        "disk_cache": settings.disk_cache_on(device),
    }
    return EngineConfig(**values)


def make_engine_backend(
    model: str | None = None, adapter: str | None = None, **options: object
) -> LocalBackend:
    """A backend on the bundled engine; one engine per model, settings and adapter per process."""
    from backends.base import LocalBackend

    loaded = load_engine(model, adapter, **options)
    backend = LocalBackend(
        f"engine:{loaded.path.name}", loaded.template, engine_decoder(loaded, options)
    )
    backend.adapter = loaded.adapter
    backend.context_tokens = loaded.engine.max_model_len
    return backend


def engine_decoder(loaded: LoadedEngine, options: dict[str, object]) -> EngineDecoder:
    """A decoder over ``loaded`` with the per-backend settings among ``options``."""
    from backends.engine.config import EngineSettings

    # Per backend, not per engine: backends sharing one loaded model may differ here.
    settings = EngineSettings.from_options(dict(options))
    speculate = settings.speculation_on(loaded.device)
    return EngineDecoder(
        loaded.engine,
        loaded.tokenizer,
        loaded.constraints,
        loaded.template.tool_format,
        num_speculative_tokens=speculate,
    )


def _check_dtype(name: str | None) -> None:
    """Unset (float32 on CPU, bfloat16 on CUDA) or one of the three float types by name."""
    if name not in (None, "", "float32", "bfloat16", "float16"):
        raise ConfigError(f"engine dtype {name!r}: choose float32, bfloat16 or float16")


def _load_engine(path: Path, config: EngineConfig) -> tuple[LLMEngine, Any]:
    from backends.engine.model.constraint import ConstraintFactory
    from backends.engine.model.model_runner import ModelRunner

    runner = ModelRunner(config)
    constraints = ConstraintFactory(runner.tokenizer, runner.config.vocab_size)
    disk = None
    if config.disk_cache:
        from backends.engine.model.kv_transfer import open_disk_cache

        disk = open_disk_cache(runner, path, config.adapter, config.disk_cache_mib << 20)
    return LLMEngine(runner, config, disk_cache=disk), constraints
