"""Grammar-constrained decoding of tool calls with xgrammar token bitmasks.

The grammar: free text (the model may answer in plain words); once the text ``<tool_call>``
appears, what follows must be ``{"name": "<one of the tools>", "arguments": <JSON valid for that
tool's parameters schema>}`` and then ``</tool_call>``, after which free text (and further calls)
may follow. A newline may stand after ``<tool_call>`` and before ``</tool_call>``, as the
ChatML-with-tools template writes them; ``backends.local.parsing`` reads either form back. Objects
get no properties beyond those their schema declares (xgrammar's strict mode).

Why xgrammar: it is actively maintained (it is the default structured-output backend of vLLM and
SGLang), it speaks token bitmasks in exactly the packed int32 layout the sampler applies, its
structural tags express "free text until a trigger, then schema-constrained JSON" directly, it
compiles a grammar for a 49k vocabulary in well under a second, and its matcher runs on the CPU
next to the model (no GPU needed). llguidance has similar masks and a lazy-lexer design but its
"free text then JSON" needs a hand-written Lark grammar per tool set; outlines-core compiles
regular expressions to automata up front, which is slow for recursive JSON schemas and has no
trigger notion at all.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import types
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from agent.errors import UserError
from backends.local.tool_format import HERMES, ToolCallFormat

if TYPE_CHECKING:
    import tokenizers
    import torch
    import xgrammar

    from agent.messages import ToolSpec

_INSTALL = "pip install 'clawloop[engine]'  (or: pip install xgrammar)"
# Compiled grammars kept per factory; an agent uses a handful of tool sets. (How much whitespace
# a tool call's JSON may hold is the tool format's: backends/local/tool_format.py.)
_CACHE_SIZE = 32


class TokenizerSource(Protocol):
    """What the factory needs from ``backends.engine.tokenizer.EngineTokenizer``."""

    hf: tokenizers.Tokenizer
    eos_token_ids: list[int]


def _xgrammar() -> Any:
    try:
        with _transformers_stand_in():
            import xgrammar
    except ImportError as exc:
        raise UserError(f"Constrained tool calls need xgrammar: {_INSTALL}") from exc
    return xgrammar


@contextlib.contextmanager
def _transformers_stand_in() -> Any:
    """While xgrammar is first imported, an empty module named ``transformers``.

    xgrammar imports transformers at import time for its Hugging Face helpers alone
    (``TokenizerInfo.from_huggingface`` and ``contrib.hf``), which the engine does not use: it
    builds its TokenizerInfo from the vocabulary (``build_tokenizer_info``). Importing
    transformers costs about 0.55 s of every `agent run` on the engine. The stand-in goes away
    once xgrammar is imported, so a later ``import transformers`` loads the real one; where
    transformers or xgrammar is already loaded nothing changes.
    """
    if "xgrammar" in sys.modules or "transformers" in sys.modules:
        yield
        return
    stand_in = types.ModuleType("transformers")
    for name in ("PreTrainedTokenizerBase", "PreTrainedTokenizerFast", "LogitsProcessor"):
        setattr(stand_in, name, type(name, (), {}))
    sys.modules["transformers"] = stand_in
    try:
        yield
    finally:
        if sys.modules.get("transformers") is stand_in:
            del sys.modules["transformers"]


class TokenConstraint:
    """One sequence's grammar state: which tokens may come next, advanced token by token."""

    def __init__(self, compiled: xgrammar.CompiledGrammar, stop_token_ids: list[int]) -> None:
        xgr = _xgrammar()
        self._matcher = xgr.GrammarMatcher(compiled, override_stop_tokens=stop_token_ids)

    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the tokens allowed next into ``bitmask[row]`` (CPU int32, xgrammar layout)."""
        self._matcher.fill_next_token_bitmask(bitmask, row)

    def accept(self, token_id: int) -> bool:
        """Advance by one token; False (state unchanged) if the grammar does not allow it."""
        return bool(self._matcher.accept_token(token_id))

    def forced_tokens(self, limit: int) -> list[int]:
        """Accept and return up to ``limit`` tokens the grammar allows no alternative to.

        These are the jump-forward tokens (xgrammar tokenizes the forced text, leaving out a
        last token that a longer token could still extend, and never returns end tokens): the
        engine feeds them to the model with the next step instead of decoding them one by one.
        """
        if limit <= 0:
            return []
        accepted: list[int] = []
        for token in self._matcher.find_jump_forward_tokens()[:limit]:
            if not self._matcher.accept_token(token):
                break  # not expected: keep what the grammar took
            accepted.append(int(token))
        return accepted

    def peek_forced(self) -> list[int]:
        """The tokens :meth:`forced_tokens` would accept now, without accepting them."""
        return [int(t) for t in self._matcher.find_jump_forward_tokens()]

    def is_terminated(self) -> bool:
        """True once a stop token was accepted in a state where the text may end."""
        return bool(self._matcher.is_terminated())

    def reset(self) -> None:
        """Back to the start, for a sequence that is recomputed after preemption."""
        self._matcher.reset()

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted tokens (after walking through drafts)."""
        if num_tokens > 0:
            self._matcher.rollback(num_tokens)

    def allowed_prefix(self, tokens: list[int], jump_forward: bool = False) -> int:
        """How many leading ``tokens`` the grammar takes from here; the state is left as it was.

        Stops before a token that ends the grammar (no next-token mask follows it) and, with
        ``jump_forward``, after one past which the grammar forces text: the engine appends
        those forced tokens itself, so a draft running on would spell them differently.
        """
        accepted = count = 0
        for token in tokens:
            if not self._matcher.accept_token(token):
                break
            accepted += 1
            if self._matcher.is_terminated():
                break
            count += 1
            if jump_forward and len(self._matcher.find_jump_forward_tokens()) > 0:
                break
        self.rollback(accepted)
        return count


class ConstraintFactory:
    """Builds tool-call constraints for one tokenizer; compiled grammars are cached per tool set."""

    def __init__(self, tokenizer_info_source: TokenizerSource, vocab_size: int) -> None:
        xgr = _xgrammar()
        self.vocab_size = vocab_size
        self.stop_token_ids = list(tokenizer_info_source.eos_token_ids)
        self.tokenizer_info = build_tokenizer_info(
            tokenizer_info_source.hf, vocab_size, self.stop_token_ids
        )
        self._compiler = xgr.GrammarCompiler(self.tokenizer_info, cache_enabled=False)
        self._cache: OrderedDict[str, xgrammar.CompiledGrammar] = OrderedDict()
        # Requests from many threads share the cache. Compiling happens outside the lock (two
        # threads may compile the same tool set once each; both results are equal).
        self._cache_lock = threading.Lock()

    def for_tools(
        self,
        tools: Sequence[ToolSpec] | None,
        *,
        required: bool = False,
        fmt: ToolCallFormat = HERMES,
    ) -> TokenConstraint | None:
        """A fresh constraint for a request offering ``tools``; None when there are none.

        ``required`` (tool_choice "required") makes at least one tool call mandatory; ``fmt`` is
        the chat template's tool-call format, whose structural tag is compiled.
        """
        if not tools:
            return None
        specs = [_tool_dict(t) for t in tools]
        key = json.dumps([specs, required, fmt.name], sort_keys=True)
        with self._cache_lock:
            compiled = self._cache.get(key)
            if compiled is not None:
                self._cache.move_to_end(key)
        if compiled is None:
            compiled = self._compile(specs, required, fmt)
            with self._cache_lock:
                self._cache[key] = compiled
                if len(self._cache) > _CACHE_SIZE:
                    self._cache.popitem(last=False)
        return TokenConstraint(compiled, self.stop_token_ids)

    def for_schema(self, schema: dict[str, Any]) -> TokenConstraint:
        """A fresh constraint for compact JSON valid under ``schema`` (a response_format);
        a schema xgrammar cannot compile is a :class:`UserError` that says so."""
        key = json.dumps(["response_format", schema], sort_keys=True)
        with self._cache_lock:
            compiled = self._cache.get(key)
        if compiled is None:
            xgr = _xgrammar()
            try:
                compiled = self._compiler.compile_json_schema(
                    json.dumps(schema), any_whitespace=False, strict_mode=True
                )
            except (RuntimeError, ValueError, TypeError, xgr.InvalidJSONError) as exc:
                raise UserError(
                    f"response_format: xgrammar cannot turn this schema into a grammar ({exc})"
                ) from None
            with self._cache_lock:
                self._cache[key] = compiled
                if len(self._cache) > _CACHE_SIZE:
                    self._cache.popitem(last=False)
        return TokenConstraint(compiled, self.stop_token_ids)

    def _compile(
        self, specs: list[dict[str, Any]], required: bool, fmt: ToolCallFormat
    ) -> xgrammar.CompiledGrammar:
        xgr = _xgrammar()
        try:
            return self._compiler.compile_structural_tag(fmt.structural_tag(specs, required))
        except (RuntimeError, ValueError, xgr.InvalidJSONError, xgr.InvalidStructuralTagError):
            pass
        # Some schema is beyond xgrammar (or malformed): keep the call's shape and the tool name,
        # let that tool's arguments be any JSON object, and leave validation to the tool.
        fixed = []
        for spec in specs:
            try:
                self._compiler.compile_json_schema(json.dumps(spec["parameters"]))
            except (RuntimeError, ValueError, xgr.InvalidJSONError):
                warnings.warn(
                    f"tool {spec['name']!r}: its parameters schema cannot be compiled to a "
                    "grammar; its arguments are constrained to any JSON object",
                    stacklevel=3,
                )
                spec = {**spec, "parameters": {"type": "object"}}
            fixed.append(spec)
        return self._compiler.compile_structural_tag(fmt.structural_tag(fixed, required))


def build_tokenizer_info(
    hf: tokenizers.Tokenizer, vocab_size: int, stop_token_ids: list[int]
) -> xgrammar.TokenizerInfo:
    """xgrammar's view of a ``tokenizers.Tokenizer``, without needing a transformers wrapper.

    Special added tokens (other than the stop tokens) get an empty string, which xgrammar treats
    as "never text": control tokens cannot appear inside free text or JSON.
    """
    xgr = _xgrammar()
    encoded: list[str] = [""] * vocab_size
    for token, idx in hf.get_vocab(with_added_tokens=True).items():
        if idx < vocab_size:
            encoded[idx] = token
    for idx, added in hf.get_added_tokens_decoder().items():
        if added.special and idx < vocab_size and idx not in stop_token_ids:
            encoded[idx] = ""
    vocab_type, add_prefix_space = _vocab_type(json.loads(hf.to_str()))
    return xgr.TokenizerInfo(
        encoded,
        getattr(xgr.VocabType, vocab_type),
        vocab_size=vocab_size,
        stop_token_ids=stop_token_ids,
        add_prefix_space=add_prefix_space,
    )


def _vocab_type(spec: dict[str, Any]) -> tuple[str, bool]:
    """(xgrammar VocabType name, add_prefix_space) from a tokenizer.json's decoder and friends.

    BYTE_LEVEL: GPT-2 style byte-to-unicode pieces (Llama 3, Qwen, SmolLM); BYTE_FALLBACK:
    SentencePiece pieces with ``<0xAB>`` byte tokens (Llama 2, Mistral); RAW otherwise.
    """
    decoders = _components(spec.get("decoder"))
    kinds = {d.get("type") for d in decoders}
    if "ByteLevel" in kinds:
        return "BYTE_LEVEL", False
    if "ByteFallback" in kinds:
        # SentencePiece models add a leading "▁" unless told not to.
        prepends = [
            c
            for c in _components(spec.get("pre_tokenizer")) + _components(spec.get("normalizer"))
            if c.get("type") in ("Metaspace", "Prepend")
        ]
        add_prefix_space = any(
            c.get("prepend_scheme", "always") != "never"
            if c.get("type") == "Metaspace"
            else c.get("prepend") == "▁"
            for c in prepends
        )
        return "BYTE_FALLBACK", add_prefix_space
    return "RAW", False


def _components(node: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A tokenizer.json component flattened through ``Sequence`` wrappers."""
    if not node:
        return []
    inner = node.get("decoders") or node.get("pretokenizers") or node.get("normalizers")
    if node.get("type") == "Sequence" and inner:
        return [leaf for child in inner for leaf in _components(child)]
    return [node]


def _tool_dict(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.function.name, "parameters": tool.function.parameters}


def fill_bitmasks(
    constraints: Sequence[TokenConstraint | None], vocab_size: int
) -> torch.Tensor | None:
    """One CPU bitmask row per sampled sequence (all ones where there is no constraint).

    None when no sequence is constrained, so the sampler can skip masking altogether.
    """
    if all(c is None for c in constraints):
        return None
    import torch

    words = (vocab_size + 31) // 32
    bitmask = torch.full((len(constraints), words), -1, dtype=torch.int32)
    for row, constraint in enumerate(constraints):
        if constraint is not None:
            constraint.fill_bitmask(bitmask, row)
    return bitmask
