"""Verifying drafted tokens: one forward pass over them, then the acceptance rule per row.

A sequence with drafts ``t1..td`` is fed its last token and the drafts; row ``j`` of its logits
is the model's next-token distribution after ``t1..tj``. Walking the rows in order, draft
``t(j+1)`` is kept with probability ``p_j(t(j+1))``, where ``p_j`` is the distribution the plain
sampler would draw from (grammar mask, temperature, top-k, top-p, min-p applied); at the first
rejection the step emits a token drawn from ``p_j`` with ``t(j+1)`` taken out and the rest
renormalised, and stops. If every draft is kept the last row gives one more token, drawn from
``p_d``. This is speculative sampling's rule for a draft that is a point mass (the draft model's
``q`` puts all its mass on the guessed token: accept with ``min(1, p/q) = p(t)``, resample from
``max(0, p - q)`` normalised), so every emitted token has exactly the plain sampler's
distribution. A greedy row keeps a draft only if it is the argmax and otherwise emits the argmax:
the output is the same as without drafts, token for token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from backends.engine.model.sampler import (
    _GREEDY_EPS,
    SamplingSettings,
    _argmax,
    _exponential_noise,
    filtered_probs,
    seed_for_step,
    unpack_bitmask,
)

if TYPE_CHECKING:
    import torch

    from backends.engine.core.batch import StepBatch

# Acceptance draws use their own stream, apart from the sampler's noise for the same step.
_ACCEPT_SALT = 0x5EC0_DEC0_DE5E_ED01


def verify(
    logits: torch.Tensor,
    params: Sequence[SamplingSettings],
    output_counts: Sequence[int],
    drafts: Sequence[Sequence[int]],
    bitmask: torch.Tensor | None = None,
    forced: Sequence[frozenset[int]] | None = None,
) -> list[list[int]]:
    """The tokens each sequence emits this step: its kept drafts, then one token of its own.

    ``logits`` holds ``len(drafts[i]) + 1`` consecutive rows per sequence ``i``; ``bitmask``
    (packed, as for the sampler) one row per logits row. ``forced[i]`` names the positions of
    ``drafts[i]`` that hold text the grammar forces: kept whenever the drafts before them are,
    as the engine would have appended them without drafts.
    """
    import torch

    counts = [len(d) + 1 for d in drafts]
    row_params = [p for p, n in zip(params, counts, strict=True) for _ in range(n)]
    row_counts = [c + j for c, n in zip(output_counts, counts, strict=True) for j in range(n)]
    if logits.shape[0] != len(row_params):
        raise ValueError(f"verify: {logits.shape[0]} logit rows for {len(row_params)} positions")
    x = logits.float()
    if bitmask is not None:
        x = x.masked_fill(~unpack_bitmask(bitmask.to(x.device), x.shape[1]), float("-inf"))
    greedy = [p.temperature <= _GREEDY_EPS for p in row_params]
    argmax = _argmax(x)
    # The drafted token of each row (the next row's input); the last row of a sequence has none.
    guess = [t for d in drafts for t in [*d, -1]]
    if all(greedy):
        best = argmax.tolist()  # the step's one device-to-host copy
        keep_rows = [g == a for g, a in zip(guess, best, strict=True)]
        return _walk(drafts, best, _force(keep_rows, drafts, forced))
    probs = filtered_probs(x, row_params, greedy)
    probs = probs / probs.sum(dim=-1, keepdim=True)  # min-p leaves rows unnormalised
    has_guess = torch.tensor([g >= 0 for g in guess], device=x.device)
    index = torch.tensor([max(g, 0) for g in guess], device=x.device).unsqueeze(1)
    p_guess = probs.gather(1, index).squeeze(1)
    # A row with a guess draws its token from the residual: the guess taken out.
    residual = probs.scatter(1, index, 0.0)
    residual = torch.where(has_guess.unsqueeze(1), residual, probs)
    noise = _exponential_noise(residual, row_params, row_counts, greedy)
    drawn = _argmax(residual / noise)
    uniform = _uniforms(row_params, row_counts, x.device)
    keep = uniform < p_guess
    greedy_t = torch.tensor(greedy, device=x.device)
    tokens = torch.where(greedy_t, argmax, drawn)
    keep = torch.where(greedy_t, argmax == index.squeeze(1), keep) & has_guess
    both = torch.stack([tokens, keep.long()]).cpu().tolist()  # the step's one device-to-host copy
    return _walk(drafts, both[0], _force([bool(k) for k in both[1]], drafts, forced))


def _force(
    keep: list[bool], drafts: Sequence[Sequence[int]], forced: Sequence[frozenset[int]] | None
) -> list[bool]:
    """``keep`` with every forced draft position kept."""
    if forced:
        row = 0
        for draft, positions in zip(drafts, forced, strict=True):
            for j in positions:
                if j < len(draft):
                    keep[row + j] = True
            row += len(draft) + 1
    return keep


def _walk(drafts: Sequence[Sequence[int]], tokens: list[int], keep: list[bool]) -> list[list[int]]:
    """Per sequence: the drafts up to the first one not kept, then that row's own token."""
    out: list[list[int]] = []
    row = 0
    for draft in drafts:
        emitted: list[int] = []
        for j, guess in enumerate(draft):
            if not keep[row + j]:
                emitted.append(tokens[row + j])
                break
            emitted.append(guess)
        else:
            emitted.append(tokens[row + len(draft)])
        out.append(emitted)
        row += len(draft) + 1
    return out


def _uniforms(
    params: Sequence[SamplingSettings], counts: Sequence[int], device: torch.device
) -> torch.Tensor:
    """One U[0, 1) draw per row; a seeded row's depends only on (seed, output count)."""
    import torch

    u = torch.rand(len(params), device=device)
    pairs = enumerate(zip(params, counts, strict=True))
    seeded = [(i, p.seed, c) for i, (p, c) in pairs if p.seed is not None]
    if seeded:
        gen = torch.Generator(device=device)
        for i, seed, count in seeded:
            gen.manual_seed(seed_for_step(seed ^ _ACCEPT_SALT, count))
            u[i] = torch.rand(1, generator=gen, device=device)[0]
    return u


def draft_bitmask(
    constraints: Sequence[Any],
    drafts: Sequence[Sequence[int]],
    vocab: int,
    forced: Sequence[frozenset[int]] | None = None,
) -> torch.Tensor | None:
    """The grammar's packed bitmask for every verified row: for a constrained sequence, its
    matcher is walked through the drafts (row ``j`` after ``t1..tj``) and rolled back after.
    A row that judges a forced draft position is left unmasked: nothing reads it.

    The drafts must be ones the grammar accepts (``TokenConstraint.allowed_prefix``).
    """
    if all(c is None for c in constraints):
        return None
    import torch

    rows = sum(len(d) + 1 for d in drafts)
    mask = torch.full((rows, (vocab + 31) // 32), -1, dtype=torch.int32)
    row = 0
    for index, (constraint, draft) in enumerate(zip(constraints, drafts, strict=True)):
        skip = forced[index] if forced else frozenset()
        if constraint is not None:
            constraint.fill_bitmask(mask, row)
            for j, token in enumerate(draft):
                if not constraint.accept(token):
                    raise RuntimeError(f"the grammar refused draft token {token}")
                if j + 1 not in skip:
                    constraint.fill_bitmask(mask, row + j + 1)
            constraint.rollback(len(draft))
        row += len(draft) + 1
    return mask


def execute_speculative(runner: Any, batch: StepBatch) -> list[list[int]]:
    """One forward over ``batch`` (a ``ModelRunner``'s), verifying its drafts; per sampled
    sequence, the tokens it emits. Runs on the runner's compute thread.

    Only the rows whose logits are read get the last layer and the LM head: a row that would
    judge a forced draft position is skipped (its keys and values are still stored), and its
    logits are left at zero."""
    import torch

    from backends.engine.model.model_runner import _cumulative

    with torch.inference_mode():
        ends = _cumulative(batch.query_lens)
        forced = batch.draft_forced or [frozenset() for _ in batch.drafts]
        rows: list[int] = []  # the step's token rows that need logits
        places: list[int] = []  # where each goes among the verified rows
        place = 0
        for i, draft, skip in zip(batch.sample_indices, batch.drafts, forced, strict=True):
            first = ends[i + 1] - 1 - len(draft)
            for j in range(len(draft) + 1):
                if j not in skip:
                    rows.append(first + j)
                    places.append(place)
                place += 1
        picked = torch.tensor(rows, dtype=torch.long, device=runner.device)
        hidden = runner._forward(batch, picked)
        if not batch.sample_indices:
            return []
        logits = runner.model.logits(hidden)
        if len(rows) < place:
            full = logits.new_zeros((place, logits.shape[1]))
            full[torch.tensor(places, dtype=torch.long, device=logits.device)] = logits
            logits = full
        bitmask = draft_bitmask(batch.constraints, batch.drafts, logits.shape[1], forced)
        return verify(logits, batch.sampling, batch.output_counts, batch.drafts, bitmask, forced)
