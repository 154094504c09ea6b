"""Tests for tool-call constraints: random walks through the grammar always yield valid calls."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
import torch

# Skip (rather than fail to collect) where the engine extra is not installed.
import xgrammar as xgr
from tool_specs import object_tool

from agent.messages import FunctionSpec, ToolSpec
from backends.engine.model.constraint import (
    ConstraintFactory,
    TokenConstraint,
    _vocab_type,
    build_tokenizer_info,
    fill_bitmasks,
)
from backends.engine.model.sampler import unpack_bitmask

VOCAB = 49152
TOOLS = [
    object_tool(
        "read_file",
        {
            "path": {"type": "string", "maxLength": 24},
            "max_lines": {"type": "integer", "minimum": 1, "maximum": 500},
        },
        ["path"],
        "Read a text file.",
    ),
    object_tool(
        "run_shell",
        {
            "command": {"type": "string", "minLength": 1, "maxLength": 30},
            "flags": {"type": "array", "items": {"enum": ["-a", "-l", "--verbose"]}, "maxItems": 3},
            "timeout": {"type": "number"},
            "env": {"type": "object", "properties": {"HOME": {"type": "string", "maxLength": 10}}},
        },
        ["command", "flags"],
    ),
    object_tool(
        "set_mode",
        {"mode": {"enum": ["fast", "safe"]}, "verbose": {"type": "boolean"}},
        ["mode", "verbose"],
    ),
    ToolSpec(function=FunctionSpec(name="list_dir")),
]
SCHEMAS = {t.function.name: t.function.parameters for t in TOOLS}


class GgufTokenizer:
    """The bundled model's tokenizer, shaped like the engine's: the engine's own when it is
    there, else rebuilt by transformers from the GGUF file."""

    def __init__(self) -> None:
        from agent.errors import UserError
        from backends.gguf.default_model import default_model_path

        try:
            path = Path(default_model_path())
        except UserError as exc:
            pytest.skip(str(exc))
        try:
            from backends.engine.tokenizer import load_tokenizer
        except ImportError:
            transformers = pytest.importorskip("transformers")
            tok = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
            self.hf = tok.backend_tokenizer
            self.eos_token_ids = [tok.eos_token_id]
        else:
            engine_tokenizer = load_tokenizer(path)
            self.hf = engine_tokenizer.hf
            self.eos_token_ids = engine_tokenizer.eos_token_ids
        self.vocab_size = VOCAB

    def encode(self, text: str) -> list[int]:
        return list(self.hf.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        return str(self.hf.decode(ids, skip_special_tokens=False))


@pytest.fixture(scope="module")
def tokenizer() -> GgufTokenizer:
    return GgufTokenizer()


@pytest.fixture(scope="module")
def factory(tokenizer: GgufTokenizer) -> ConstraintFactory:
    return ConstraintFactory(tokenizer, VOCAB)


@pytest.fixture(scope="module")
def closers(tokenizer: GgufTokenizer) -> np.ndarray:
    """Tokens made only of JSON closing punctuation: the random walk favours them to finish."""
    texts = [tokenizer.decode([idx]) for idx in range(VOCAB)]
    return np.array([bool(t) and set(t) <= set('"}],') for t in texts])


def allowed(constraint: TokenConstraint) -> torch.Tensor:
    bitmask = fill_bitmasks([constraint], VOCAB)
    assert bitmask is not None
    return unpack_bitmask(bitmask, VOCAB)[0]


def accept_text(constraint: TokenConstraint, tokenizer: GgufTokenizer, text: str) -> list[int]:
    ids = tokenizer.encode(text)
    for token in ids:
        assert allowed(constraint)[token], f"{tokenizer.decode([token])!r} not allowed"
        assert constraint.accept(token)
    return ids


def random_allowed(constraint: TokenConstraint, rng: random.Random, prefer: np.ndarray) -> int:
    """Uniform among allowed tokens; half the time only among allowed closing tokens (if any)."""
    # numpy, not torch: tiny torch ops pay a thread-pool handoff each, which dominates here.
    mask = allowed(constraint).numpy()
    if rng.random() < 0.5 and (mask & prefer).any():
        mask = mask & prefer
    choices = np.flatnonzero(mask)
    return int(choices[rng.randrange(len(choices))])


def test_random_walks_produce_valid_tool_calls(
    factory: ConstraintFactory, tokenizer: GgufTokenizer, closers: np.ndarray
) -> None:
    rng = random.Random(0)
    names_seen: set[str] = set()
    calls = 0
    for episode in range(40):
        constraint = factory.for_tools(TOOLS)
        assert constraint is not None
        ids: list[int] = []
        for call_index in range(1 + episode % 2):
            # Some free text, uniformly random, then the trigger.
            for _ in range(rng.randrange(4)):
                token = random_allowed(constraint, rng, np.zeros(VOCAB, dtype=bool))
                assert constraint.accept(token)
                ids.append(token)
            ids += accept_text(constraint, tokenizer, " <tool_call>")
            for _step in range(400):
                token = random_allowed(constraint, rng, closers)
                assert constraint.accept(token)
                ids.append(token)
                # The closing tag may share its last token with the free text after it.
                if tokenizer.decode(ids).count("</tool_call>") > call_index:
                    break
            else:
                pytest.fail(f"no end of the call after 400 tokens: {tokenizer.decode(ids)!r}")
        assert allowed(constraint)[tokenizer.eos_token_ids[0]]
        assert constraint.accept(tokenizer.eos_token_ids[0])
        assert constraint.is_terminated()

        text = tokenizer.decode(ids)
        bodies = re.findall(r"<tool_call>(.*?)</tool_call>", text, flags=re.S)
        assert len(bodies) == 1 + episode % 2, text
        for body in bodies:
            call = json.loads(body)
            assert set(call) == {"name", "arguments"}
            assert call["name"] in SCHEMAS
            jsonschema.validate(call["arguments"], SCHEMAS[call["name"]])
            names_seen.add(call["name"])
            calls += 1
    assert names_seen == set(SCHEMAS)
    assert calls == 60


def test_free_text_is_unconstrained(factory: ConstraintFactory, tokenizer: GgufTokenizer) -> None:
    constraint = factory.for_tools(TOOLS)
    assert constraint is not None
    special = set(factory.tokenizer_info.special_token_ids)
    start = allowed(constraint)
    # Everything but control tokens: text, and the stop token to end a plain answer.
    assert int(start.sum()) == VOCAB - len(special)
    assert start[tokenizer.eos_token_ids[0]]
    accept_text(constraint, tokenizer, 'I think the answer is 42, no tool needed. {"json": ok}')
    assert int(allowed(constraint).sum()) == VOCAB - len(special)
    assert constraint.accept(tokenizer.eos_token_ids[0])
    assert constraint.is_terminated()


def test_forbidden_tokens_are_rejected(
    factory: ConstraintFactory, tokenizer: GgufTokenizer
) -> None:
    constraint = factory.for_tools(TOOLS)
    assert constraint is not None
    im_start = tokenizer.encode("<|im_start|>")
    assert len(im_start) == 1 and not allowed(constraint)[im_start[0]]
    assert not constraint.accept(im_start[0])
    accept_text(constraint, tokenizer, '<tool_call>{"name": "')
    mask = allowed(constraint)
    hello = tokenizer.encode("hello")[0]
    assert not mask[hello] and not constraint.accept(hello)
    # Stopping in the middle of a call is not allowed either.
    eos = tokenizer.eos_token_ids[0]
    assert not mask[eos] and not constraint.accept(eos)
    # Only the tools' names continue (the rejections above left the state unchanged).
    assert 0 < int(mask.sum()) < 20
    accept_text(constraint, tokenizer, 'set_mode", "arguments": {"mode": "safe", "verbose": true}}')
    accept_text(constraint, tokenizer, "</tool_call>")
    assert constraint.accept(eos)


def test_termination_and_reset(factory: ConstraintFactory, tokenizer: GgufTokenizer) -> None:
    constraint = factory.for_tools(TOOLS)
    assert constraint is not None
    text = '<tool_call>{"name": "list_dir", "arguments": {}}</tool_call>'
    ids = accept_text(constraint, tokenizer, text)
    before_stop = allowed(constraint)
    assert not constraint.is_terminated()
    assert constraint.accept(tokenizer.eos_token_ids[0])
    assert constraint.is_terminated()
    assert not constraint.accept(ids[0])
    constraint.reset()
    assert not constraint.is_terminated()
    assert int(allowed(constraint).sum()) > 40000
    # After a reset the same tokens are accepted again (a preempted sequence is replayed).
    assert accept_text(constraint, tokenizer, text) == ids
    assert torch.equal(allowed(constraint), before_stop)


def test_the_templates_newlines_and_the_compact_form_are_both_calls(
    factory: ConstraintFactory, tokenizer: GgufTokenizer
) -> None:
    args = '{"command": "ls", "flags": ["-l"]}'
    for text in (
        f'<tool_call>\n{{"name": "run_shell", "arguments": {args}}}\n</tool_call>',
        f'<tool_call>{{"name": "run_shell", "arguments": {args}}}</tool_call>',
    ):
        constraint = factory.for_tools(TOOLS)
        assert constraint is not None
        accept_text(constraint, tokenizer, text)
        assert constraint.accept(tokenizer.eos_token_ids[0])
    # Keys the schema does not declare are not allowed.
    constraint = factory.for_tools(TOOLS)
    assert constraint is not None
    accept_text(constraint, tokenizer, '<tool_call>{"name": "list_dir", "arguments": {')
    assert not allowed(constraint)[tokenizer.encode('"')[0]]


def test_required_starts_with_a_call(factory: ConstraintFactory, tokenizer: GgufTokenizer) -> None:
    constraint = factory.for_tools(TOOLS, required=True)
    assert constraint is not None
    mask = allowed(constraint)
    assert not mask[tokenizer.eos_token_ids[0]]
    assert not constraint.accept(tokenizer.encode("Hello")[0])
    accept_text(
        constraint, tokenizer, '<tool_call>{"name": "list_dir", "arguments": {}}</tool_call>'
    )
    assert constraint.accept(tokenizer.eos_token_ids[0])


def test_grammars_are_cached_per_tool_set(factory: ConstraintFactory) -> None:
    assert factory.for_tools([]) is None and factory.for_tools(None) is None
    first = factory.for_tools(TOOLS[:2])
    cached = len(factory._cache)
    second = factory.for_tools([t.model_copy(deep=True) for t in TOOLS[:2]])
    assert first is not None and second is not None and first is not second
    assert len(factory._cache) == cached
    factory.for_tools(TOOLS[1:3])
    assert len(factory._cache) == cached + 1


def test_uncompilable_schema_falls_back_to_any_object(
    factory: ConstraintFactory, tokenizer: GgufTokenizer
) -> None:
    broken = ToolSpec(
        function=FunctionSpec(
            name="broken", parameters={"type": "object", "properties": {"x": {"$ref": "#/nope"}}}
        )
    )
    with pytest.warns(UserWarning, match="broken"):
        constraint = factory.for_tools([broken, TOOLS[2]])
    assert constraint is not None
    accept_text(constraint, tokenizer, '<tool_call>{"name": "broken", "arguments": {"y": [1]}}')
    # The well-formed tool keeps its schema.
    constraint.reset()
    accept_text(constraint, tokenizer, '<tool_call>{"name": "set_mode", "arguments": {"mode": "')
    assert not constraint.accept(tokenizer.encode("slow")[0])


def test_tokenizer_info_agrees_with_xgrammars_own_detection(tokenizer: GgufTokenizer) -> None:
    transformers = pytest.importorskip("transformers")
    ours = build_tokenizer_info(tokenizer.hf, VOCAB, tokenizer.eos_token_ids)
    wrapped = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer.hf)
    theirs = xgr.TokenizerInfo.from_huggingface(
        wrapped, vocab_size=VOCAB, stop_token_ids=tokenizer.eos_token_ids
    )
    assert ours.vocab_type == theirs.vocab_type == xgr.VocabType.BYTE_LEVEL
    assert ours.add_prefix_space == theirs.add_prefix_space
    assert ours.stop_token_ids == theirs.stop_token_ids
    special = set(ours.special_token_ids)
    assert 0 < len(special) < 50 and not special & set(tokenizer.eos_token_ids)
    ours_vocab, theirs_vocab = ours.decoded_vocab, theirs.decoded_vocab
    assert all(ours_vocab[i] == theirs_vocab[i] for i in range(VOCAB) if i not in special)
    assert ours_vocab[tokenizer.encode(" hello")[0]] == b" hello"


def test_vocab_type_detection_for_sentencepiece_and_raw() -> None:
    llama2: dict[str, Any] = {
        "normalizer": {
            "type": "Sequence",
            "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace"}],
        },
        "decoder": {
            "type": "Sequence",
            "decoders": [{"type": "Replace"}, {"type": "ByteFallback"}, {"type": "Fuse"}],
        },
    }
    assert _vocab_type(llama2) == ("BYTE_FALLBACK", True)
    metaspace = {
        "pre_tokenizer": {"type": "Metaspace", "prepend_scheme": "never"},
        "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}]},
    }
    assert _vocab_type(metaspace) == ("BYTE_FALLBACK", False)
    assert _vocab_type({"decoder": {"type": "WordPiece"}}) == ("RAW", False)
    assert _vocab_type({"decoder": None}) == ("RAW", False)


def test_fill_bitmasks_leaves_unconstrained_rows_open(factory: ConstraintFactory) -> None:
    assert fill_bitmasks([None, None], VOCAB) is None
    constraint = factory.for_tools(TOOLS, required=True)
    bitmask = fill_bitmasks([None, constraint, None], VOCAB)
    assert bitmask is not None and bitmask.dtype == torch.int32
    assert bitmask.shape == (3, VOCAB // 32)
    rows = unpack_bitmask(bitmask, VOCAB)
    assert bool(rows[0].all()) and bool(rows[2].all())
    assert int(rows[1].sum()) == 1


def test_xgrammar_loads_without_transformers_and_leaves_the_real_one_importable() -> None:
    """In a fresh process (where nothing imported transformers first): the engine's import of
    xgrammar skips transformers, grammars still compile and constrain, and a later import of
    transformers is the real package."""
    import subprocess
    import sys

    script = """
import sys
from backends.gguf.default_model import default_model_path
from backends.engine.model.constraint import ConstraintFactory, _xgrammar
from backends.gguf.reader import read_gguf
from backends.engine.tokenizer import tokenizer_from_gguf
from agent.messages import FunctionSpec, ToolSpec

_xgrammar()
assert "xgrammar" in sys.modules and "transformers" not in sys.modules
tokenizer = tokenizer_from_gguf(read_gguf(default_model_path()))
factory = ConstraintFactory(tokenizer, 49152)
tool = ToolSpec(function=FunctionSpec(name="shell", parameters={
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}))
constraint = factory.for_tools([tool], required=True)
text = '<tool_call>{"name": "shell", "arguments": {"command": "wc -l README.md"}}</tool_call>'
for token in tokenizer.encode(text):
    assert constraint.accept(token), token
fresh = factory.for_tools([tool], required=True)
assert not fresh.accept(tokenizer.encode("Hello")[0])  # a tool call is required
import transformers
assert hasattr(transformers.PreTrainedTokenizerFast, "from_pretrained")
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"
