"""Drafts under a grammar: n-gram candidates, forced runs inside a draft, cutting a draft, and
verification keeping forced positions.

``ScriptedGrammar`` stands in for a compiled tool-call grammar here (the real one, on the real
tokenizer, is in test_speculation_model.py): it takes exactly one token sequence, and names the
positions in it whose tokens are forced, as jump-forward text is.
"""

from __future__ import annotations

import torch

from backends.engine.core.grammar_drafts import grammar_draft
from backends.engine.core.params import SamplingParams
from backends.engine.core.sequence import Sequence
from backends.engine.core.speculation import ngram_candidates
from backends.engine.model.verify import verify


class ScriptedGrammar:
    """A grammar that allows only ``script``, token by token; ``forced`` positions of it admit
    no alternative (their tokens are what ``peek_forced`` returns)."""

    def __init__(self, script: list[int], forced: set[int]) -> None:
        self.script = script
        self.forced = forced
        self.at = 0

    def accept(self, token_id: int) -> bool:
        if self.at < len(self.script) and self.script[self.at] == token_id:
            self.at += 1
            return True
        return False

    def rollback(self, num_tokens: int) -> None:
        assert 0 <= num_tokens <= self.at
        self.at -= num_tokens

    def peek_forced(self) -> list[int]:
        run = []
        at = self.at
        while at in self.forced:
            run.append(self.script[at])
            at += 1
        return run

    def allowed_prefix(self, tokens: list[int], jump_forward: bool = False) -> int:
        count = 0
        for token in tokens:
            if not self.accept(token):
                break
            count += 1
            if jump_forward and self.peek_forced():
                break
        self.rollback(count)
        return count


def test_candidates_come_longest_tail_first_then_nearest_and_distinct() -> None:
    tokens = [1, 2, 3, 7, 5, 2, 3, 8, 2, 3, 8, 9, 6, 3, 4, 1, 2, 3]
    # tail (1, 2, 3): the 3-gram at 0 (-> 7); then (2, 3) copies, nearest first: 8 (twice, once
    # kept), 7 (same as the 3-gram's, dropped); then (3): 4
    assert list(ngram_candidates(tokens, 1)) == [[7], [8], [4]]
    assert list(ngram_candidates(tokens, 1, limit=2)) == [[7], [8]]
    assert list(ngram_candidates(tokens, 2)) == [[7, 5], [8, 9], [8, 2], [4, 1]]
    assert list(ngram_candidates([1, 2, 3], 2)) == []
    assert list(ngram_candidates(tokens, 0)) == []


# The output so far ends in 10; the grammar then takes 20 21 (free), 30 31 32 (forced),
# 40 41 (free), 50 (forced), 60 (free).
SCRIPT = [20, 21, 30, 31, 32, 40, 41, 50, 60]
FORCED = {2, 3, 4, 7}
# earlier in the prompt: every free span once, after the token that leads to it
HISTORY = [10, 20, 21, 99, 32, 40, 41, 98, 50, 60, 97, 10]


def test_a_draft_runs_through_forced_text_and_guesses_on() -> None:
    grammar = ScriptedGrammar(SCRIPT, FORCED)
    draft = grammar_draft(HISTORY, 4, 20, grammar, jump_forward=True)
    assert draft.tokens == [20, 21, 30, 31, 32, 40, 41, 50, 60][: len(draft.tokens)]
    # 4 guesses (20 21, 40 41) with the forced runs between and after them
    assert draft.tokens == [20, 21, 30, 31, 32, 40, 41, 50]
    assert draft.forced == {2, 3, 4, 7}
    assert draft.num_guessed == 4
    assert grammar.at == 0  # the state is left as it was


def test_a_forced_run_is_never_cut_by_the_space_left() -> None:
    grammar = ScriptedGrammar(SCRIPT, FORCED)
    # 4 tokens of space: the guesses 20 21 fit, the forced run after them (3 more) does not
    draft = grammar_draft(HISTORY, 4, 4, grammar, jump_forward=True)
    assert draft.tokens == [20, 21] and draft.forced == frozenset()
    assert grammar.at == 0


def test_without_jump_forward_a_draft_stops_where_the_grammar_refuses() -> None:
    grammar = ScriptedGrammar(SCRIPT, FORCED)
    # the n-gram guess after 10 is 20 21 99: the grammar refuses 99
    draft = grammar_draft(HISTORY, 3, 20, grammar, jump_forward=False)
    assert draft.tokens == [20, 21] and draft.forced == frozenset()


def test_the_candidate_the_grammar_takes_whole_wins_over_the_nearer_one() -> None:
    grammar = ScriptedGrammar([20, 21, 22], set())
    # nearest copy of the tail (10) is followed by 20 25 (refused at 25); an older one by 20 21 22
    history = [10, 20, 21, 22, 0, 10, 20, 25, 0, 10]
    assert grammar_draft(history, 3, 10, grammar, jump_forward=True).tokens == [20, 21, 22]
    # no candidate the grammar takes whole: the longest part taken
    grammar = ScriptedGrammar([20, 21, 23], set())
    assert grammar_draft(history, 3, 10, grammar, jump_forward=True).tokens == [20, 21]


def test_cutting_a_draft_keeps_a_forced_run_whole_or_not_at_all() -> None:
    seq = Sequence.new(0, [1, 2, 3], SamplingParams())
    for keep, left in ((8, 8), (5, 5), (4, 2), (3, 2), (2, 2), (1, 1), (0, 0)):
        seq.draft_ids = [20, 21, 30, 31, 32, 40, 41, 50]
        seq.draft_forced = frozenset(FORCED)
        seq.cut_draft(keep)
        assert len(seq.draft_ids) == left, keep


def test_verification_keeps_forced_positions_and_checks_the_guesses_after_them() -> None:
    greedy = SamplingParams(temperature=0.0)
    vocab = 8
    # rows after: last token, draft[0]=1 (a guess), draft[1]=2 (forced), draft[2]=3 (a guess)
    best = [1, 5, 3, 4]  # the model would not have chosen the forced 2 (5 instead)
    logits = torch.full((4, vocab), -5.0)
    for row, token in enumerate(best):
        logits[row, token] = 5.0
    draft = [[1, 2, 3]]
    assert verify(logits, [greedy], [0], draft) == [[1, 5]]  # without the mark: cut at 2
    forced = [frozenset({1})]
    assert verify(logits, [greedy], [0], draft, None, forced) == [[1, 2, 3, 4]]
    # a wrong guess before the forced run still cuts the draft there
    assert verify(logits, [greedy], [0], [[6, 2, 3]], None, forced) == [[1]]
    # and a wrong guess after it, after the forced token
    assert verify(logits, [greedy], [0], [[1, 2, 6]], None, forced) == [[1, 2, 3]]
    # the sampling path keeps forced positions too (temperature 1, the forced row's mass on 5)
    sampled = SamplingParams(temperature=1.0, seed=3)
    logits[1] = torch.full((vocab,), -30.0)
    logits[1, 5] = 30.0
    out = verify(logits, [sampled], [0], [[1, 2, 3]], None, forced)
    assert out[0][:2] == [1, 2]
