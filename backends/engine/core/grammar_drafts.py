"""Drafts under a grammar: n-gram guesses the grammar takes, joined by the text it forces.

A tool call is mostly fixed text (``{"name": "``, ``", "arguments": {``) with a few free
spans between (the tool's name, the argument values). Without drafts each free token costs a
step, and each forced run of text (jump-forward) rides along with the next step. With drafts,
a step would end wherever the grammar forces text, since the forced run cannot be guessed by
n-gram lookup and must be spelled as the engine spells it. Here the forced tokens go into the
draft themselves, marked forced, and the guessing goes on after them: one step can verify the
guess for a name, the fixed text after it and the guess for the first argument. A forced token
is kept whenever the tokens before it are (the engine would have appended it anyway), so the
output is the same as without drafts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from backends.engine.core.speculation import ngram_candidates


class DraftGrammar(Protocol):
    """What drafting needs of a sequence's grammar state (a ``TokenConstraint``)."""

    def accept(self, token_id: int) -> bool: ...
    def rollback(self, num_tokens: int) -> None: ...
    def allowed_prefix(self, tokens: list[int], jump_forward: bool = False) -> int: ...
    def peek_forced(self) -> list[int]: ...


@dataclass(slots=True)
class Draft:
    """Drafted tokens, and the positions among them the grammar forces."""

    tokens: list[int] = field(default_factory=list)
    forced: frozenset[int] = frozenset()

    @property
    def num_guessed(self) -> int:
        return len(self.tokens) - len(self.forced)


def grammar_draft(
    token_ids: list[int], guesses: int, space: int, grammar: DraftGrammar, jump_forward: bool
) -> Draft:
    """Up to ``guesses`` guessed tokens after ``token_ids``, with the forced runs between them,
    in at most ``space`` tokens in all; the grammar's state is left as it was.

    Each guess is the n-gram candidate the grammar takes most of (the first it takes whole);
    with ``jump_forward``, where a guess reaches text the grammar forces, that text is added
    whole (never cut: the engine would append all of it) and guessing goes on after it.
    """
    tokens: list[int] = []
    forced: set[int] = set()
    guessed = 0
    try:
        while True:
            room = min(guesses - guessed, space - len(tokens))
            part = _best_candidate(token_ids + tokens, room, grammar, jump_forward)
            if not part:
                break
            taken = _walk(grammar, part)
            tokens += part[:taken]
            guessed += taken
            if taken < len(part):
                break  # not expected: allowed_prefix said the grammar takes them
            if not jump_forward:
                break
            run = grammar.peek_forced()
            if not run or len(tokens) + len(run) > space:
                break
            taken = _walk(grammar, run)
            forced.update(range(len(tokens), len(tokens) + taken))
            tokens += run[:taken]
            if taken < len(run):
                break  # not expected: the grammar forced them
    finally:
        grammar.rollback(len(tokens))
    return Draft(tokens, frozenset(forced))


def _best_candidate(
    token_ids: list[int], room: int, grammar: DraftGrammar, jump_forward: bool
) -> list[int]:
    """The n-gram candidate the grammar keeps most of: the first it takes whole, else the
    longest part it takes (the nearer copy on ties)."""
    best: list[int] = []
    if room <= 0:
        return best
    for candidate in ngram_candidates(token_ids, room):
        keep = grammar.allowed_prefix(candidate, jump_forward)
        if keep > len(best):
            best = candidate[:keep]
        if keep == len(candidate):
            break
    return best


def _walk(grammar: DraftGrammar, tokens: list[int]) -> int:
    """Advance ``grammar`` through ``tokens``; how many it took before one it refused."""
    for taken, token in enumerate(tokens):
        if not grammar.accept(token):
            return taken
    return len(tokens)
