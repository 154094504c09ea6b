"""Prompt-lookup speculative decoding: the proposer, the acceptance rule, and the paging.

The paging tests run a fake model that copies (so drafts are often right) over the fake paged
cache, which reads every context back through the block tables: a draft's keys left where a
later token should be, or a block freed too early, changes the output.
"""

from __future__ import annotations

import hashlib
import random
from array import array
from collections import Counter

import pytest
import torch
from fake_runner import FakeRunner

from agent.errors import UserError
from backends.engine.core.batch import StepBatch
from backends.engine.core.engine_config import EngineConfig
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.core.params import SamplingParams
from backends.engine.core.speculation import SpeculationStats, propose_ngram
from backends.engine.model.verify import verify


def test_longest_and_latest_match_wins() -> None:
    # tail (7, 8, 9): a 3-gram match at 1..3 is preferred to later 1-gram matches of 9.
    tokens = [5, 7, 8, 9, 1, 2, 3, 9, 4, 0, 8, 9, 6, 7, 8, 9]
    assert propose_ngram(tokens, 3) == [1, 2, 3]
    # two copies of the 3-gram: the later one's continuation is taken
    assert propose_ngram([1, 2, 3, 4, 1, 2, 3, 5, 6, 1, 2, 3], 2) == [5, 6]
    # no 3-gram or 2-gram match: the last token alone
    assert propose_ngram([4, 9, 1, 2, 9], 2) == [1, 2]
    assert propose_ngram([1, 2, 3], 4) == []  # nothing repeats
    assert propose_ngram([1, 2, 1], 4) == [2, 1]  # the draft may run into the tail itself
    assert propose_ngram([1, 2, 1], 0) == []
    assert propose_ngram([], 3) == []


def test_matches_are_whole_tokens() -> None:
    # As bytes, 0x0100 followed by 0x0002 contains 0x0201 at an odd offset; it is no token match.
    tokens = [0x0100_0000, 0x0002, 7, 0x0201]
    assert propose_ngram(tokens, 2) == []
    big = [70000, 123456, 70000]
    assert propose_ngram(big, 1) == [123456]


def test_stats_rates() -> None:
    stats = SpeculationStats()
    assert stats.acceptance_rate == 0.0 and stats.tokens_per_step == 0.0
    stats.record(4, 3, 4)
    stats.record(4, 0, 1)
    assert stats.acceptance_rate == 3 / 8
    assert stats.tokens_per_step == 2.5


def test_out_of_range_draft_length_is_a_user_error() -> None:
    with pytest.raises(UserError, match="num_speculative_tokens"):
        SamplingParams(num_speculative_tokens=17).check()


# --- the acceptance rule -------------------------------------------------------------------------


def _logits(probs: list[float]) -> torch.Tensor:
    return torch.tensor(probs).log()


def test_greedy_keeps_drafts_up_to_the_first_non_argmax() -> None:
    greedy = SamplingParams(temperature=0.0)
    rows = [_logits(p) for p in ([0.1, 0.6, 0.3], [0.5, 0.2, 0.3], [0.2, 0.2, 0.6])]
    logits = torch.stack(rows)
    # draft (1, 0): both argmax, so the last row's argmax (2) follows
    assert verify(logits, [greedy], [0], [[1, 0]]) == [[1, 0, 2]]
    # draft (1, 2): the second is wrong; row 1's argmax (0) replaces it
    assert verify(logits, [greedy], [0], [[1, 2]]) == [[1, 0]]
    # draft (2, ...): the first is wrong
    assert verify(logits, [greedy], [0], [[2, 0]]) == [[1]]


def test_the_first_token_has_the_target_distribution() -> None:
    """Accept with p(t), else draw from p with t removed: the emitted token is distributed as p,
    after the request's filters (here temperature and top-k), whatever the draft."""
    torch.manual_seed(0)
    n = 40_000
    raw = [0.05, 0.35, 0.25, 0.2, 0.1, 0.05]
    params = SamplingParams(temperature=0.7, top_k=4)
    # the target: temperature 0.7, then the best four renormalised
    scaled = torch.softmax(_logits(raw) / 0.7, dim=0)
    kept = scaled.topk(4).indices
    target = torch.zeros(6)
    target[kept] = scaled[kept] / scaled[kept].sum()
    for draft_token in (1, 4, 0):  # likely, unlikely, and one top-k removes (never accepted)
        logits = _logits(raw).repeat(2 * n, 1)
        emitted = verify(logits, [params] * n, [0] * n, [[draft_token]] * n)
        first = Counter(e[0] for e in emitted)
        freq = torch.tensor([first[t] / n for t in range(6)])
        assert (freq - target).abs().max() < 0.012, (draft_token, freq, target)
        accepted = sum(1 for e in emitted if len(e) == 2)
        assert abs(accepted / n - float(target[draft_token])) < 0.012
        # after an accepted draft the bonus token comes from the next row: also the target
        bonus = Counter(e[1] for e in emitted if len(e) == 2)
        if accepted > 5000:
            freq = torch.tensor([bonus[t] / accepted for t in range(6)])
            assert (freq - target).abs().max() < 0.02


def test_a_seeded_request_verifies_the_same_way_every_time() -> None:
    params = [SamplingParams(temperature=1.0, seed=s) for s in range(64)]
    logits = torch.randn(64 * 3, 50)
    drafts = [[s % 50, (s * 7) % 50] for s in range(64)]
    first = verify(logits, params, [3] * 64, drafts)
    assert verify(logits, params, [3] * 64, drafts) == first
    assert len({tuple(e) for e in first}) > 10


# --- the paging: a copying fake model ------------------------------------------------------------

PERIOD = 5


def copying_model(context: list[int]) -> int:
    """Repeats the token PERIOD back, except every 7th position, which is a hash of the context."""
    if len(context) % 7 and len(context) >= PERIOD:
        return context[-PERIOD]
    digest = hashlib.blake2b(array("q", context).tobytes(), digest_size=8).digest()
    return 32 + int.from_bytes(digest, "little") % 95


def copying_reference(prompt: list[int], max_tokens: int) -> list[int]:
    tokens = list(prompt)
    for _ in range(max_tokens):
        tokens.append(copying_model(tokens))
    return tokens[len(prompt) :]


class CopyingRunner(FakeRunner):
    """The fake paged runner over :func:`copying_model`, with drafts verified greedily."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        super().__init__(num_blocks, block_size)
        self.drafted = 0

    def execute(self, batch: StepBatch) -> list[int]:
        return [tokens[0] for tokens in self.execute_speculative(batch)]

    def execute_speculative(self, batch: StepBatch) -> list[list[int]]:
        self.batches.append(batch)
        self.tokens_computed += len(batch.input_ids)
        for slot, token, position in zip(
            batch.slot_mapping, batch.input_ids, batch.positions, strict=True
        ):
            self.cache[slot] = (token, position)
        drafts = batch.drafts or [[] for _ in batch.sample_indices]
        out = []
        for index, draft in zip(batch.sample_indices, drafts, strict=True):
            self.drafted += len(draft)
            end = batch.context_lens[index]
            emitted = []
            for j in range(len(draft) + 1):
                context = self._read(batch.block_tables[index], end - len(draft) + j)
                token = copying_model(context)
                emitted.append(token)
                if j == len(draft) or token != draft[j]:
                    break
            out.append(emitted)
        return out


def test_drafts_roll_back_under_preemption_prefix_hits_and_mixed_batches() -> None:
    rng = random.Random(3)
    prompts = [[rng.randrange(32, 127) for _ in range(rng.randint(3, 40))] for _ in range(24)]
    spec = SamplingParams(temperature=0.0, max_tokens=40, num_speculative_tokens=4)
    plain = SamplingParams(temperature=0.0, max_tokens=40)
    params = [spec if i % 3 else plain for i in range(len(prompts))]
    expected = [copying_reference(p, 40) for p in prompts]
    # 60 blocks of 4 tokens for 24 sequences of up to 80: preemption is certain
    runner = CopyingRunner(num_blocks=60, block_size=4)
    engine = LLMEngine(runner, EngineConfig(max_num_batched_tokens=96))
    ids = [engine.add_request(p, sp) for p, sp in zip(prompts, params, strict=True)]
    results = {}
    while engine.has_unfinished():
        for out in engine.step():
            if out.result is not None:
                results[out.request_id] = out.result.token_ids
        engine.scheduler.check_invariants()
    assert [results[i] for i in ids] == expected
    assert engine.num_preemptions > 0
    stats = engine.stats.speculation
    assert stats.num_accepted_tokens > 100 and stats.tokens_per_step > 1.5
    assert engine.block_manager.num_free_blocks == 60
    # with room: the conversations continued hit the prefix cache (answers' blocks included)
    roomy = LLMEngine(CopyingRunner(num_blocks=1024, block_size=4))
    first = roomy.generate(prompts, params)
    assert [r.token_ids for r in first] == expected
    turns = [p + r.token_ids for p, r in zip(prompts, first, strict=True)]
    again = roomy.generate(turns, params)
    assert [r.token_ids for r in again] == [copying_reference(t, 40) for t in turns]
    assert sum(r.cached_tokens for r in again) > 0.8 * sum(len(t) for t in turns)
    roomy.scheduler.check_invariants()


def test_drafts_respect_max_tokens_and_stop_tokens() -> None:
    prompt = [65, 66, 67, 68, 69] * 4
    runner = CopyingRunner(num_blocks=64, block_size=4)
    engine = LLMEngine(runner)
    for limit in (1, 2, 3, 9):
        params = SamplingParams(temperature=0.0, max_tokens=limit, num_speculative_tokens=5)
        result = engine.generate([prompt], params)[0]
        assert result.token_ids == copying_reference(prompt, limit)
        assert result.finish_reason == "length"
    # a stop token: the drafts after it are never emitted, and the text stops before it
    reference = copying_reference(prompt, 20)
    stop = reference[3]
    expected = reference[: reference.index(stop) + 1]
    params = SamplingParams(
        temperature=0.0, max_tokens=20, num_speculative_tokens=5, stop_token_ids=[stop]
    )
    result = engine.generate([prompt], params)[0]
    assert result.token_ids == expected
    assert result.text == bytes(expected[:-1]).decode()
    assert result.finish_reason == "stop"
    assert engine.stats.speculation.num_accepted_tokens > 0
    assert engine.block_manager.num_free_blocks == 64
