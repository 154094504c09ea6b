"""Prompt-lookup speculative decoding on the bundled model: greedy output is the same token for
token with and without it (chat prompts that copy, a tool-call grammar, a batch mixing requests
that speculate with ones that do not, a prefix-cache hit), and sampling keeps its distribution.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from tool_specs import object_tool

from agent.messages import UserMessage
from backends.engine.core.engine_config import EngineConfig
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.core.params import SamplingParams
from backends.engine.model.constraint import ConstraintFactory
from backends.engine.model.model_runner import ModelRunner
from backends.gguf.default_model import default_model_path
from backends.local.chat_template import ChatTemplate

TOOLS = [object_tool("read_file", {"path": {"type": "string"}}, ["path"], "Read a text file.")]
COPY_TASKS = [
    "Repeat this line exactly: the server at 127.0.0.1:8080 reads config/settings.yaml first.",
    'Rewrite this JSON with the same keys: {"name": "report.txt", "size": 2048, "owner": "ada"}',
    "List the files: src/main.py, src/util.py, tests/test_main.py, README.md. Now list them again.",
]


@pytest.fixture(scope="module")
def runner() -> Iterator[ModelRunner]:
    runner = ModelRunner(EngineConfig(default_model_path(), kv_cache_bytes=192 << 20))
    yield runner
    runner.close()


@pytest.fixture(scope="module")
def template(runner: ModelRunner) -> ChatTemplate:
    tok: Any = runner.tokenizer
    return ChatTemplate(tok.chat_template, tok.bos_token, tok.eos_token)


def chat(template: ChatTemplate, runner: ModelRunner, text: str, tools: Any = None) -> list[int]:
    prompt = template.render([UserMessage(content=text)], tools)
    return list(runner.tokenizer.encode(prompt))


def run(engine: LLMEngine, prompts: list[list[int]], params: list[SamplingParams]) -> list[Any]:
    return engine.generate(prompts, params)


def test_greedy_output_is_identical_with_and_without_drafts(
    runner: ModelRunner, template: ChatTemplate
) -> None:
    prompts = [chat(template, runner, t) for t in COPY_TASKS]
    plain = SamplingParams(temperature=0.0, max_tokens=32)
    spec = SamplingParams(temperature=0.0, max_tokens=32, num_speculative_tokens=5)
    off = LLMEngine(runner).generate(prompts, plain)
    engine = LLMEngine(runner)
    on = [engine.generate([p], spec)[0] for p in prompts]  # one at a time
    assert [r.token_ids for r in on] == [r.token_ids for r in off]
    assert [r.text for r in on] == [r.text for r in off]
    stats = engine.stats.speculation
    # the model copies: a good share of the drafts are right, and steps emit more than one token
    assert stats.acceptance_rate > 0.3 and stats.tokens_per_step > 1.5, stats
    assert engine.num_steps < sum(len(r.token_ids) for r in on)
    assert engine.block_manager.num_free_blocks == engine.block_manager.num_blocks


def test_a_batch_mixing_speculating_and_plain_requests_with_a_prefix_hit(
    runner: ModelRunner, template: ChatTemplate
) -> None:
    prompts = [chat(template, runner, t) for t in COPY_TASKS]
    plain = SamplingParams(temperature=0.0, max_tokens=24)
    spec = SamplingParams(temperature=0.0, max_tokens=24, num_speculative_tokens=4)
    expected = [r.token_ids for r in LLMEngine(runner).generate(prompts, plain)]
    engine = LLMEngine(runner)
    mixed = [spec, plain, spec]
    first = engine.generate(prompts, mixed)
    assert [r.token_ids for r in first] == expected
    # the same conversations continued: the prompt (and the answer's full blocks) are cached
    again = [p + r.token_ids for p, r in zip(prompts, first, strict=True)]
    turn = engine.generate(again, [plain, spec, spec])
    assert all(r.cached_tokens >= len(p) - 16 for r, p in zip(turn, prompts, strict=True))
    reference = LLMEngine(runner).generate(again, plain)
    assert [r.token_ids for r in turn] == [r.token_ids for r in reference]
    engine.scheduler.check_invariants()
    assert engine.stats.speculation.num_accepted_tokens > 0


def test_a_tool_call_grammar_keeps_greedy_output_identical(
    runner: ModelRunner, template: ChatTemplate
) -> None:
    factory = ConstraintFactory(runner.tokenizer, runner.config.vocab_size)
    prompt = chat(
        template, runner, "Read the file notes/todo.txt, then read notes/todo.txt again.", TOOLS
    )
    results = []
    for k in (0, 5):
        params = SamplingParams(temperature=0.0, max_tokens=40, num_speculative_tokens=k)
        for jump_forward in (True, False):
            engine = LLMEngine(runner, EngineConfig(jump_forward=jump_forward))
            constraint = factory.for_tools(TOOLS, required=True, fmt=template.tool_format)
            request = engine.add_request(prompt, params, constraint)
            while engine.has_unfinished():
                for out in engine.step():
                    if out.result is not None and out.request_id == request:
                        results.append((k, jump_forward, out.result.text))
            if k:
                stats = engine.stats.speculation
                assert stats.num_drafts > 0
                # each verification step emits its kept guesses and one token of its own; more
                # than that is forced text that rode in the drafts (jump-forward only)
                carried = stats.num_emitted_tokens - stats.num_drafts - stats.num_accepted_tokens
                assert (carried > 0) == jump_forward, stats
    texts = {jf: {t for k, j, t in results if j == jf} for jf in (True, False)}
    assert all(len(t) == 1 for t in texts.values()), results  # on and off agree
    assert '"name": "read_file"' in texts[True].pop()


def test_sampling_keeps_the_distribution(runner: ModelRunner, template: ChatTemplate) -> None:
    """Seeds 0..n-1 with drafts and without. The first token comes from the prefill step, the
    same for a seed in both runs; the second is sampled plainly in one run and verified against a
    draft in the other (right for some seeds, wrong for others, so both branches of the rule
    run): the frequencies of (first, second) must agree."""
    base = chat(template, runner, "Continue the list: 1, 2, 3, 4, 5, 6, 7")
    n = 200
    counts = []
    for k in (0, 3):
        engine = LLMEngine(runner, EngineConfig(max_num_seqs=n))
        engine.generate([base], SamplingParams(temperature=0.0, max_tokens=1))  # warm the cache
        params = [
            SamplingParams(temperature=0.7, seed=s, max_tokens=3, num_speculative_tokens=k)
            for s in range(n)
        ]
        results = engine.generate([base] * n, params)
        counts.append(Counter(tuple(r.token_ids[:2]) for r in results))
        if k:
            stats = engine.stats.speculation
            # a draft when the first token is one the prompt has (most seeds here)
            assert stats.num_drafts > n // 3, stats
            assert 0 < stats.num_accepted_tokens < stats.num_draft_tokens, stats
    plain, spec = counts
    # A two-sample chi-square over the pairs seen at least 10 times (the rest pooled).
    common = [t for t in plain.keys() | spec.keys() if plain[t] + spec[t] >= 10]
    cells = [(plain[t], spec[t]) for t in common]
    cells.append((n - sum(a for a, _ in cells), n - sum(b for _, b in cells)))
    chi2 = sum((a - b) ** 2 / (a + b) for a, b in cells if a + b)
    dof = len(cells) - 1
    # 0.1% critical values of chi-square; the test is deterministic (seeded requests)
    critical = {1: 10.8, 2: 13.8, 3: 16.3, 4: 18.5, 5: 20.5, 6: 22.5, 7: 24.3, 8: 26.1}
    assert chi2 < critical.get(dof, 3 * dof + 4), (chi2, cells)
    assert plain != spec  # the runs really drew differently


def test_the_grammar_takes_a_drafts_allowed_prefix_and_rolls_back(runner: ModelRunner) -> None:
    import torch

    factory = ConstraintFactory(runner.tokenizer, runner.config.vocab_size)
    constraint = factory.for_tools(TOOLS, required=True)
    assert constraint is not None
    tokens = runner.tokenizer.encode('<tool_call>\n{"name": "read_file", "arguments": {"path": "a')
    words = (runner.config.vocab_size + 31) // 32

    def mask() -> torch.Tensor:
        out = torch.zeros((1, words), dtype=torch.int32)
        constraint.fill_bitmask(out, 0)
        return out

    start = mask()
    assert constraint.allowed_prefix(tokens) == len(tokens)
    # a token the grammar refuses (free text where the JSON must go on) cuts the draft there
    bad = runner.tokenizer.encode(" hello")
    assert constraint.allowed_prefix(tokens[:5] + bad + tokens[5:]) == 5
    # with jump-forward, the draft ends at the first token after which the grammar forces text
    cut = constraint.allowed_prefix(tokens, jump_forward=True)
    assert 0 < cut < len(tokens)
    assert torch.equal(mask(), start)  # every call left the state as it was
    for token in tokens[:cut]:
        assert constraint.accept(token)
    assert constraint.forced_tokens(8)  # there the grammar does force text


def test_a_draft_carries_the_text_a_tool_call_grammar_forces(runner: ModelRunner) -> None:
    """On the real grammar and tokenizer: after a guessed tool name the draft takes the fixed
    text the grammar forces, then guesses the argument from an earlier call, all in one draft."""
    import torch

    from backends.engine.core.grammar_drafts import grammar_draft

    factory = ConstraintFactory(runner.tokenizer, runner.config.vocab_size)
    constraint = factory.for_tools(TOOLS, required=True)
    assert constraint is not None
    tok = runner.tokenizer
    earlier = tok.encode(
        'I called <tool_call>\n{"name": "read_file", "arguments": {"path": "notes/todo.txt"}}'
        "\n</tool_call> before.\n"
    )
    so_far = tok.encode('<tool_call>\n{"name": "read')
    for token in so_far:
        assert constraint.accept(token)
    words = (runner.config.vocab_size + 31) // 32
    before = torch.zeros((1, words), dtype=torch.int32)
    constraint.fill_bitmask(before, 0)

    draft = grammar_draft(earlier + so_far, 8, 64, constraint, jump_forward=True)
    after = torch.zeros((1, words), dtype=torch.int32)
    constraint.fill_bitmask(after, 0)
    assert torch.equal(before, after)  # the state is left as it was
    text = tok.decode(draft.tokens)
    assert '_file", "arguments": {"path": "notes' in text, text
    assert draft.forced and max(draft.forced) < len(draft.tokens) - 1  # guesses after forced text
    assert draft.num_guessed <= 8
    # every forced position holds what the grammar forces there
    for j, token in enumerate(draft.tokens):
        if j in draft.forced:
            assert constraint.peek_forced()[:1] == [token], j
        assert constraint.accept(token)
    constraint.rollback(len(draft.tokens))
