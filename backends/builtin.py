"""The built-in backends, registered through the same plugin hook a third-party backend uses.

Each factory takes keyword options (from the command line or the config file, so numbers may
arrive as strings) and ignores options it does not know. Heavy modules are imported only when
a backend is built, so listing backends stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from agent.backend import Backend
from agent.errors import ConfigError, UserError
from agent.plugins import hookimpl

_N = TypeVar("_N", int, float)


def make_fake(script: str | Path | None = None, **_: Any) -> Backend:
    """The scripted fake backend; ``script`` is a JSON file of assistant turns."""
    from backends.fake import FakeBackend

    return FakeBackend.from_file(Path(script)) if script else FakeBackend()


def make_llamacpp(
    model: str | Path | None = None,
    n_ctx: Any = None,
    seed: Any = None,
    threads: Any = None,
    tool_first: Any = None,
    adapter: Any = None,
    disk_cache: Any = None,
    **_: Any,
) -> Backend:
    """llama.cpp on a GGUF file (default: the bundled SmolLM2-135M-Instruct), with an optional
    GGUF LoRA ``adapter``.

    ``tool_first`` (start each turn with a tool call) defaults to on for the bundled 135M model,
    which otherwise answers from thin air instead of looking, and off for any other model.
    """
    from backends.llamacpp.backend import LlamaCppOptions, make_llamacpp_backend

    options = LlamaCppOptions(
        n_ctx=_int("n_ctx", n_ctx),
        seed=_int("seed", seed),
        threads=_int("threads", threads),
        tool_first=not model if tool_first is None else _bool("tool_first", tool_first),
        disk_cache=True if disk_cache is None else _bool("disk_cache", disk_cache),
    )
    return make_llamacpp_backend(model or None, options, adapter)


def make_openai(
    base_url: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
    timeout: Any = 600.0,
    max_retries: Any = 3,
    **_: Any,
) -> Backend:
    """Any OpenAI-compatible server (vLLM, SGLang, llama-server, Ollama, agent serve)."""
    from backends.openai_compat import make_openai_backend

    seconds = _float("timeout", timeout)
    retries = _int("max_retries", max_retries)
    return make_openai_backend(
        base_url or None,
        api_key,
        model,
        600.0 if seconds is None else seconds,
        3 if retries is None else retries,
    )


def make_engine(resident: Any = None, **options: Any) -> Backend:
    """clawloop's bundled paged engine.

    ``resident`` (set by `agent run` and `agent chat`): use, or start, the resident host that
    keeps the engine loaded for ``keep_alive`` seconds (:mod:`backends.engine.resident`)."""
    for key in ("kv_cache_bytes", "block_size"):
        if key in options:
            options[key] = _int(key, options[key])
    if resident is not None and _bool("resident", resident):
        from backends.engine.config import EngineSettings
        from backends.engine.resident.client import resident_backend

        keep_alive = EngineSettings.from_options(options).keep_alive
        if keep_alive > 0:
            hosted: Backend | None = resident_backend(options, keep_alive)
            if hosted is not None:
                return hosted
    try:
        from backends.engine.backend import make_engine_backend
    except ImportError as exc:
        if (exc.name or "").startswith("backends"):
            raise UserError("the engine backend is not part of this installation") from None
        raise UserError(
            f"the engine backend needs {exc.name}: pip install 'clawloop[engine]'"
        ) from None
    options.pop("keep_alive", None)
    backend: Backend = make_engine_backend(**options)
    return backend


BUILTIN_BACKENDS: dict[str, Callable[..., Backend]] = {
    "fake": make_fake,
    "llamacpp": make_llamacpp,
    "openai": make_openai,
    "engine": make_engine,
}


@hookimpl
def register_backends(register: Callable[[str, Callable[..., Any]], None]) -> None:
    """Register fake, llamacpp, openai and engine."""
    for name, factory in BUILTIN_BACKENDS.items():
        register(name, factory)


def _int(key: str, value: Any) -> int | None:
    return _number(key, value, int, "a whole number")


def _float(key: str, value: Any) -> float | None:
    return _number(key, value, float, "a number")


def _number(key: str, value: Any, kind: Callable[[Any], _N], what: str) -> _N | None:
    """A backend option as ``kind``; None when it is not set, a ConfigError when it is not one."""
    if value is None or value == "":
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"backend option {key} must be {what}, not {value!r}") from None


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off", "", "none"}:
        return False
    raise ConfigError(f"backend option {key} must be true or false, not {value!r}")
