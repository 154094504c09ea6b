"""The llama.cpp decoder: a GGUF model run in-process through llama-cpp-python.

Tool calls are constrained with a llama.cpp *lazy* grammar rather than one grammar over the
whole output. A GBNF grammar constrains every token from the first one, so "free text or a
call" would have to be written as a grammar for text that never contains ``<tool_call>``,
checked against the whole vocabulary at every step of an ordinary answer. llama.cpp's lazy
grammar sampler (``llama_sampler_init_grammar_lazy_patterns``, exposed by llama-cpp-python
0.3) does what llama-server does for tool calls: decoding is free until the generated text
matches the trigger pattern, then the text from ``<tool_call>`` on is fed into the grammar and
every later token must keep it valid:

    root ::= call (sep call){0,N-1}        # N = 1 unless the request sets parallel_tool_calls
    call ::= "<tool_call>\\n" JSON "\\n</tool_call>"

where JSON is the GBNF that llama.cpp's own converter makes from
:func:`backends.local.tool_grammar.tool_call_schema` (one of the offered tools by name, with
arguments valid for its schema), its whitespace pinned to the layout the chat template
writes back, so a generated call re-renders to the same text. The tags and the grammar come
from the template's tool-call format (:mod:`backends.local.tool_format`). When the grammar is
complete only an end-of-turn token is allowed, so text before a call is free and nothing follows
the calls. With
``tool_choice="required"`` the same grammar is applied from the first token, so the reply is
a call. ``tool_first=True`` (an option of this backend) applies ``required`` to the first
step of each user turn only: small models such as the bundled SmolLM2-135M rarely start a
call on their own, and then answer from the tool's result.

A request's ``response_format`` (a JSON schema) is a plain grammar from the first token: the
GBNF llama.cpp's converter makes from the schema, with no whitespace between tokens, so the
reply can only be compact JSON valid for the schema, then an end-of-turn token. It takes the
place of the tool-call grammar for that request.

Extra buffer types (AMX, weight repacking) are off by default on CPUs that advertise AMX:
some virtual machines advertise it and then fault on its instructions (SIGILL inside a matrix
product). ``CLAWLOOP_LLAMACPP_EXTRA_BUFFERS=1`` turns them back on.

The ``Llama`` object is cached per model file in the process; it holds one sequence, so
requests are served one at a time, and each reuses the longest token prefix of the previous
prompt (the earlier turns of the conversation) from its KV cache.
"""

from __future__ import annotations

import atexit
import codecs
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.errors import BackendError, UserError
from agent.host import bound_spin_waits
from agent.messages import ChatRequest, ToolSpec, Usage
from backends.base import DecodeResult, LocalBackend
from backends.gguf.default_model import (
    INSTALL_HINT,
    check_gguf,
    default_adapter,
    default_model_path,
)
from backends.llamacpp.greedy_pick import GreedyUnderGrammar
from backends.local.chat_template import ChatTemplate
from backends.local.cpu_features import cpu_flags
from backends.local.json_gbnf import json_gbnf
from backends.local.runaway import RunawayDetector
from backends.local.stop_text import StopStringMatcher
from backends.local.tool_format import HERMES, ToolCallFormat
from backends.local.tool_grammar import tool_call_schema_json

if TYPE_CHECKING:
    from backends.llamacpp.prompt_cache import PromptStateCache

DEFAULT_N_CTX = 8192
MAX_PARALLEL_CALLS = 8
# Sampling defaults for settings a request leaves unset (llama.cpp's own defaults).
DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_TOP_P, DEFAULT_MIN_P = 0.8, 40, 0.95, 0.05
_RANDOM_SEED = 0xFFFFFFFF  # llama.cpp draws a seed
# A prompt that needed at least this many new tokens computed is saved for later processes.
SAVE_AFTER_TOKENS = 256


@dataclass(frozen=True, slots=True)
class LlamaCppOptions:
    """How a GGUF model is run: its context (unset: the model's, up to DEFAULT_N_CTX), CPU
    threads (unset: every core), sampling seed, whether each user turn starts with a tool call,
    extra buffer types (unset: :func:`default_extra_buffers`), and whether prefilled prompts are
    kept on disk for later processes (:mod:`backends.llamacpp.prompt_cache`)."""

    n_ctx: int | None = None
    threads: int | None = None
    seed: int | None = None
    tool_first: bool = False
    extra_buffers: bool | None = None
    disk_cache: bool = True


@dataclass(slots=True)
class _Loaded:
    llm: Any
    lock: threading.Lock


_MODELS: dict[tuple[str, int, int, bool, str], _Loaded] = {}
_MODELS_LOCK = threading.Lock()
_GRAMMARS: dict[tuple[str, str, int], str] = {}


def _import_llama_cpp() -> Any:
    bound_spin_waits()  # before llama.cpp loads its OpenMP runtime
    try:
        import llama_cpp
    except ImportError:
        raise UserError(f"the llamacpp backend needs llama-cpp-python: {INSTALL_HINT}") from None
    return llama_cpp


def load_llama(
    path: Path, n_ctx: int, threads: int, extra_buffers: bool, adapter: Path | None = None
) -> _Loaded:
    """The cached ``Llama`` for ``path`` (loaded on first use, with ``adapter``), and its lock."""
    key = (str(path), n_ctx, threads, extra_buffers, str(adapter or ""))
    with _MODELS_LOCK:
        if key not in _MODELS:
            if not _MODELS:
                atexit.register(close_models)
            llm = _new_llama(path, n_ctx, threads, extra_buffers, adapter)
            _MODELS[key] = _Loaded(llm, threading.Lock())
        return _MODELS[key]


def close_models() -> None:
    """Free every cached model (at exit, before llama_cpp's own globals are torn down)."""
    with _MODELS_LOCK:
        for loaded in _MODELS.values():
            if loaded.lock.acquire(timeout=5):  # a decode left suspended keeps its model
                try:
                    loaded.llm.close()
                finally:
                    loaded.lock.release()
        _MODELS.clear()


def _new_llama(
    path: Path, n_ctx: int, threads: int, extra_buffers: bool, adapter: Path | None = None
) -> Any:
    llama_cpp = _import_llama_cpp()
    low = llama_cpp.llama_cpp
    defaults = low.llama_model_default_params

    def model_params() -> Any:
        params = defaults()
        if hasattr(params, "use_extra_bufts"):
            params.use_extra_bufts = extra_buffers
        return params

    # Llama() takes no option for extra buffer types; give it default params without them.
    low.llama_model_default_params = model_params
    try:
        return llama_cpp.Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            lora_path=str(adapter) if adapter is not None else None,
            verbose=False,
        )
    except (ValueError, RuntimeError, OSError) as exc:
        raise BackendError(f"llama.cpp could not load {path}: {exc}") from None
    finally:
        low.llama_model_default_params = defaults


def default_extra_buffers() -> bool:
    """Extra buffer types (AMX, weight repacking) unless the CPU advertises AMX.

    Some virtual machines advertise AMX but fault on its instructions, which kills the process
    with SIGILL in the middle of a matrix product; set CLAWLOOP_LLAMACPP_EXTRA_BUFFERS=1 to
    use AMX anyway.
    """
    env = os.environ.get("CLAWLOOP_LLAMACPP_EXTRA_BUFFERS")
    if env is not None:
        return env.strip().lower() in {"1", "true", "yes", "on"}
    return "amx_tile" not in cpu_flags()


def tool_call_gbnf(fmt: ToolCallFormat, tools: list[ToolSpec], max_calls: int = 1) -> str:
    """The format's GBNF for these tools, cached (llama.cpp's converter is slow)."""
    key = (fmt.name, tool_call_schema_json(tools, fmt.arguments_key), max_calls)
    if key not in _GRAMMARS:
        _GRAMMARS[key] = fmt.gbnf(tools, max_calls)
    return _GRAMMARS[key]


def schema_gbnf(schema: dict[str, Any]) -> str:
    """GBNF for compact JSON valid under ``schema``, cached; a schema llama.cpp's converter
    cannot take is a :class:`BackendError` that says so."""
    text = json.dumps(schema, sort_keys=True)
    key = ("response_format", text, 0)
    if key not in _GRAMMARS:
        try:
            _GRAMMARS[key] = json_gbnf(text)
        except (AssertionError, ValueError, KeyError, TypeError, NotImplementedError) as exc:
            raise BackendError(
                f"response_format: llama.cpp cannot turn this schema into a grammar ({exc})"
            ) from None
    return _GRAMMARS[key]


class LlamaCppDecoder:
    """Prefill + decode with llama.cpp, tool calls constrained by a grammar."""

    supports_response_format = True

    def __init__(
        self,
        model_path: Path,
        options: LlamaCppOptions,
        tool_format: ToolCallFormat = HERMES,
        adapter: Path | None = None,
    ) -> None:
        self.model_path = model_path
        self.adapter = adapter
        self.disk_cache = options.disk_cache
        self._prompts: PromptStateCache | None = None  # made on first use, for this model
        self.tool_format = tool_format
        self.n_ctx = options.n_ctx or _model_context(model_path)
        self.threads = options.threads or _cores()
        self.seed = options.seed
        self.tool_first = options.tool_first
        extra_buffers = options.extra_buffers
        self.extra_buffers = default_extra_buffers() if extra_buffers is None else extra_buffers

    def decode(
        self, prompt: str, request: ChatRequest, stop: list[str], tools: list[ToolSpec] | None
    ) -> Iterator[str | DecodeResult]:
        loaded = load_llama(
            self.model_path, self.n_ctx, self.threads, self.extra_buffers, self.adapter
        )
        with loaded.lock:
            yield from self._decode(loaded.llm, prompt, request, stop, tools)

    def _decode(
        self,
        llm: Any,
        prompt: str,
        request: ChatRequest,
        stop: list[str],
        tools: list[ToolSpec] | None,
    ) -> Iterator[str | DecodeResult]:
        tokens = self._tokenize(llm, prompt)
        n_ctx = llm.n_ctx()
        if len(tokens) >= n_ctx:
            raise BackendError(
                f"the conversation is {len(tokens)} tokens, more than the model's context of "
                f"{n_ctx}: start a new session, or raise n_ctx"
            )
        prompts = self._prompt_cache(llm) if self.disk_cache else None
        if prompts is not None and llm.n_tokens == 0:
            prompts.load_best(llm, tokens)  # a new process: start from a saved prompt
        cached = _reuse_prefix(llm, tokens)
        if _seeded(request, self.seed):
            # The last prompt token alone, whatever was cached: its logits then come from the
            # same one-row evaluation every time (a many-row batch sums in another order, and
            # at a temperature above 0 that can change the sample), so a seed repeats.
            llm.eval(tokens[cached:-1])
            llm.eval(tokens[-1:])
        else:
            llm.eval(tokens[cached:])
        if prompts is not None and len(tokens) - cached >= SAVE_AFTER_TOKENS:
            prompts.save(llm, tokens)
        sampler = self._sampler(llm, request, tools)
        budget = min(request.max_tokens or n_ctx, n_ctx - len(tokens))
        text = StopStringMatcher(stop)
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        finish, generated = "length", 0
        runaway = RunawayDetector()
        while generated < budget:
            token = sampler.sample(llm._ctx, -1)  # also advances the grammar
            generated += 1
            if _is_eog(llm, token):
                finish = "stop"
                break
            if runaway.feed(token):
                break  # stuck in a loop: end as the token limit would, only sooner
            piece, stopped = text.feed(utf8.decode(llm.detokenize([token])))
            if piece:
                yield piece
            if stopped:
                finish = "stop"
                break
            llm.eval([token])
        if not text.stopped:
            rest = text.feed(utf8.decode(b"", final=True))[0] + text.flush()
            if rest:
                yield rest  # text held back for a stop string that never came
        usage = Usage(prompt_tokens=len(tokens), completion_tokens=generated, cached_tokens=cached)
        yield DecodeResult(finish_reason=finish, usage=usage)

    def _prompt_cache(self, llm: Any) -> PromptStateCache:
        if self._prompts is None:
            from backends.llamacpp.prompt_cache import PromptStateCache, folder_key

            version = str(getattr(_import_llama_cpp(), "__version__", ""))
            key = folder_key(self.model_path, self.adapter, llm.n_ctx(), version)
            self._prompts = PromptStateCache(key)
        return self._prompts

    def _tokenize(self, llm: Any, prompt: str) -> list[int]:
        tokens: list[int] = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        bos = llm.token_bos()
        if llm._model.add_bos_token() and bos >= 0 and (not tokens or tokens[0] != bos):
            tokens.insert(0, bos)  # the template did not write the BOS the model expects
        return tokens

    def _sampler(self, llm: Any, request: ChatRequest, tools: list[ToolSpec] | None) -> Any:
        from llama_cpp import LlamaGrammar
        from llama_cpp._internals import LlamaSampler

        sampler = LlamaSampler()
        constrained = request.response_format is not None or bool(tools)
        if request.response_format is not None:
            gbnf = schema_gbnf(request.response_format.output_schema())
            sampler.add_grammar(llm._model, LlamaGrammar.from_string(gbnf, verbose=False))
        elif tools:
            parallel = (request.model_extra or {}).get("parallel_tool_calls") is True
            fmt = self.tool_format
            gbnf = tool_call_gbnf(fmt, tools, MAX_PARALLEL_CALLS if parallel else 1)
            grammar = LlamaGrammar.from_string(gbnf, verbose=False)
            if self._required(request):
                sampler.add_grammar(llm._model, grammar)
            else:
                sampler.add_grammar_lazy_patterns(llm._model, grammar, [fmt.trigger_pattern], [])
        temperature = DEFAULT_TEMPERATURE if request.temperature is None else request.temperature
        if temperature <= 0:
            sampler.add_greedy()
            # The best token checked alone first: the same picks, without deciding every token
            return GreedyUnderGrammar(sampler, llm.n_vocab()) if constrained else sampler
        top_k = DEFAULT_TOP_K if request.top_k is None else request.top_k
        if top_k > 0:
            sampler.add_top_k(top_k)
        sampler.add_top_p(DEFAULT_TOP_P if request.top_p is None else request.top_p, 1)
        sampler.add_min_p(DEFAULT_MIN_P if request.min_p is None else request.min_p, 1)
        sampler.add_temp(temperature)
        seed = request.seed if request.seed is not None else self.seed
        sampler.add_dist(_RANDOM_SEED if seed is None else seed & 0xFFFFFFFF)
        return sampler

    def _required(self, request: ChatRequest) -> bool:
        if request.tool_choice is not None:
            return request.tool_choice == "required"
        return self.tool_first and bool(request.messages) and request.messages[-1].role == "user"


def _seeded(request: ChatRequest, default_seed: int | None) -> bool:
    """Sampling at a temperature above 0 with a fixed seed: the caller wants it to repeat."""
    temperature = DEFAULT_TEMPERATURE if request.temperature is None else request.temperature
    seed = request.seed if request.seed is not None else default_seed
    return temperature > 0 and seed is not None


def _reuse_prefix(llm: Any, tokens: list[int]) -> int:
    """Keep the KV cache of the prefix shared with the previous prompt; return its length."""
    previous = llm.input_ids[: llm.n_tokens].tolist()
    n = 0
    limit = min(len(previous), len(tokens) - 1)  # the last prompt token is always evaluated
    while n < limit and previous[n] == tokens[n]:
        n += 1
    if n == 0 or not llm._ctx.kv_cache_seq_rm(-1, n, -1):
        llm.reset()
        return 0
    llm.n_tokens = n
    return n


def _is_eog(llm: Any, token: int) -> bool:
    llama_cpp = _import_llama_cpp()
    return bool(llama_cpp.llama_vocab_is_eog(llm._model.vocab, token))


def _cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _model_context(path: Path) -> int:
    from backends.gguf.reader import read_gguf

    with read_gguf(path, arrays=False) as header:
        meta = header.metadata
    trained = meta.get(f"{meta.get('general.architecture')}.context_length")
    return (
        min(DEFAULT_N_CTX, trained) if isinstance(trained, int) and trained > 0 else DEFAULT_N_CTX
    )


def make_llamacpp_backend(
    model: str | Path | None = None,
    options: LlamaCppOptions = LlamaCppOptions(),
    adapter: str | Path | None = None,
) -> LocalBackend:
    """A LocalBackend on a GGUF file (the bundled SmolLM2-135M-Instruct by default).

    ``adapter`` is a GGUF LoRA file applied at load: unset, the shipped adapter for the bundled
    model (if the package holds one); "none", no adapter.
    """
    from backends.gguf.lora import adapter_path

    _import_llama_cpp()
    path = default_model_path() if model is None else check_gguf(Path(model))
    template = ChatTemplate.from_gguf(path)
    decoder = LlamaCppDecoder(
        path, options, template.tool_format, adapter_path(adapter, default_adapter(path))
    )
    backend = LocalBackend("llamacpp", template, decoder)
    backend.adapter = decoder.adapter
    backend.context_tokens = decoder.n_ctx
    return backend
