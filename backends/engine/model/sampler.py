"""Per-request sampling for one batch of logits, without a CPU-GPU sync.

Every row carries its own settings (greedy, temperature, top-k, top-p, min-p, seed), so requests
with different settings share one step. The order is: grammar bitmask (disallowed tokens get
-inf), temperature, top-k, top-p, min-p, then a random choice by ``argmax(probs / q)`` with
``q ~ Exponential(1)``: that picks token ``i`` with probability ``probs[i] / sum(probs)`` (the
exponential race), needs no normalisation and, unlike ``torch.multinomial``, no sync.

Per-row parameters are read on the host (they are Python objects already) and copied to the
device once per call; on a GPU nothing is read back. Work is skipped when no row needs it: a
greedy-only batch is one argmax, top-k alone is a ``topk`` (k-th largest value as threshold),
and only top-p needs the tokens in order. On the CPU, where reading a value back costs nothing,
top-p first tries the few hundred best tokens of each row (a ``topk``, ~15x cheaper than sorting
a 49k vocabulary) and sorts whole only the rows whose nucleus is wider.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

# Temperatures at or below this are greedy; dividing by them would overflow float32.
_GREEDY_EPS = 1e-5
_MASK64 = (1 << 64) - 1
# On the CPU, top-p looks at this many best tokens per row before sorting the whole row.
_CPU_CANDIDATES = 512


class SamplingSettings(Protocol):
    """The fields of ``backends.engine.core.params.SamplingParams`` the sampler reads."""

    temperature: float
    top_k: int
    top_p: float
    min_p: float
    seed: int | None


def sample(
    logits: torch.Tensor,
    params: Sequence[SamplingSettings],
    output_counts: Sequence[int],
    bitmask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Pick one token per row of ``logits`` ([n, vocab] float); returns [n] int64 on its device.

    ``params[i]`` and ``output_counts[i]`` (tokens the request generated so far) describe row ``i``;
    ``bitmask`` is xgrammar's packed layout, int32 [n, ceil(vocab / 32)], bit ``t % 32`` of word
    ``t // 32`` set when token ``t`` is allowed.
    """
    import torch

    n, vocab = logits.shape
    if len(params) != n or len(output_counts) != n:
        raise ValueError(
            f"sample: {n} logit rows but {len(params)} params and {len(output_counts)} counts"
        )
    if n == 0:
        return torch.empty(0, dtype=torch.int64, device=logits.device)
    x = logits.float()
    if bitmask is not None:
        # Grammar matchers fill the bitmask on the CPU; ship it over before unpacking.
        bitmask = bitmask.to(x.device, non_blocking=True)
        x = x.masked_fill(~unpack_bitmask(bitmask, vocab), float("-inf"))

    greedy = [p.temperature <= _GREEDY_EPS for p in params]
    if all(greedy):
        return _argmax(x)
    greedy_ids = _argmax(x) if any(greedy) else None

    probs = filtered_probs(x, params, greedy)
    q = _exponential_noise(probs, params, output_counts, greedy)
    ids = _argmax(probs / q)
    if greedy_ids is not None:
        ids = torch.where(_to_device(greedy, torch.bool, x.device), greedy_ids, ids)
    return ids


def filtered_probs(
    x: torch.Tensor, params: Sequence[SamplingSettings], greedy: list[bool]
) -> torch.Tensor:
    """Each row's distribution after temperature, top-k, top-p and min-p, from float32 logits
    that already carry the grammar mask. Rows sum to 1 except after min-p, which leaves them
    unnormalised (no sampler step needs the scale); greedy rows are plain softmax."""
    import torch

    vocab = x.shape[1]
    device = x.device
    temps = [1.0 if g else float(p.temperature) for g, p in zip(greedy, params, strict=True)]
    if any(t != 1.0 for t in temps):
        x = x / _to_device(temps, torch.float32, device).unsqueeze(1)

    # Greedy rows keep every filter off: their answer is the argmax.
    top_k = [0 if g else _clamp_k(p.top_k, vocab) for g, p in zip(greedy, params, strict=True)]
    top_p = [1.0 if g else float(p.top_p) for g, p in zip(greedy, params, strict=True)]
    min_p = [0.0 if g else float(p.min_p) for g, p in zip(greedy, params, strict=True)]
    if any(p < 1.0 for p in top_p):
        x = _top_k_top_p(x, top_k, top_p)
    elif any(k > 0 for k in top_k):
        x = _top_k_only(x, top_k)

    probs = torch.softmax(x, dim=-1)
    if any(m > 0.0 for m in min_p):
        threshold = (
            probs.amax(dim=-1, keepdim=True) * _to_device(min_p, torch.float32, device)[:, None]
        )
        probs = probs.masked_fill(probs < threshold, 0.0)
    return probs


def unpack_bitmask(bitmask: torch.Tensor, vocab: int) -> torch.Tensor:
    """Expand xgrammar's packed int32 bitmask [n, words] to bool [n, vocab], True = allowed."""
    import torch

    if bitmask.device.type == "cpu":
        import numpy as np

        # One pass in numpy instead of four elementwise torch ops: bit t % 32 of little-endian
        # word t // 32 is bit t % 8 of byte t // 8.
        raw = bitmask.numpy().astype("<i4", copy=False).view(np.uint8)
        bits = np.unpackbits(raw, axis=-1, count=vocab, bitorder="little")
        return torch.from_numpy(bits.view(np.bool_))
    return _unpack_bitmask_torch(bitmask, vocab)


def _unpack_bitmask_torch(bitmask: torch.Tensor, vocab: int) -> torch.Tensor:
    """The device-side unpacking (shift and mask), used for GPU tensors."""
    import torch

    shifts = torch.arange(32, dtype=torch.int32, device=bitmask.device)
    bits = (bitmask.to(torch.int32).unsqueeze(-1) >> shifts) & 1
    return bits.reshape(bitmask.shape[0], -1)[:, :vocab].bool()


def seed_for_step(seed: int, output_count: int) -> int:
    """The generator seed for a request's ``output_count``-th token (splitmix64 of both)."""
    z = ((seed & _MASK64) * 0x9E3779B97F4A7C15 + output_count + 1) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _clamp_k(k: int, vocab: int) -> int:
    return 0 if k <= 0 or k >= vocab else int(k)


def _argmax(x: torch.Tensor) -> torch.Tensor:
    """Each row's index of its largest value, the first one on ties (as ``argmax``).

    On the CPU numpy's ``argmax`` gives the same indices several times faster than torch's
    reductions over rows this wide (the bundled model's 49,152 logits on a 2-core Xeon: 5 against
    52 us for one row of ``torch.max``, 0.32 against 1.5 ms for 33 rows; ``argmax`` is slower
    still). On a GPU, and for dtypes numpy lacks (bfloat16), ``max`` over the last dimension stays.
    """
    import torch

    if x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64):
        return torch.from_numpy(x.detach().numpy().argmax(axis=-1))
    return torch.max(x, dim=-1).indices


def _to_device(values: list, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Host list to a device tensor; pinned and asynchronous when the target is a GPU."""
    import torch

    if device.type == "cpu":
        return torch.tensor(values, dtype=dtype)
    return torch.tensor(values, dtype=dtype, pin_memory=True).to(device, non_blocking=True)


def _top_k_only(x: torch.Tensor, top_k: list[int]) -> torch.Tensor:
    """Mask everything below each row's k-th largest logit (rows with k = 0 untouched)."""
    import torch

    device = x.device
    ks = _to_device(top_k, torch.int64, device)
    values = torch.topk(x, max(top_k), dim=-1).values
    kth = values.gather(1, (ks - 1).clamp(min=0).unsqueeze(1))
    drop = (x < kth) & (ks > 0).unsqueeze(1)
    return x.masked_fill(drop, float("-inf"))


def _top_k_top_p(x: torch.Tensor, top_k: list[int], top_p: list[float]) -> torch.Tensor:
    """Cut each row to its top k, then to its nucleus of mass top_p; -inf elsewhere."""
    import torch

    vocab = x.shape[1]
    device = x.device
    ks = _to_device([k if k > 0 else vocab for k in top_k], torch.int64, device)
    ps = _to_device(top_p, torch.float32, device)
    width = max(_CPU_CANDIDATES, *top_k)
    if device.type != "cpu" or width >= vocab:
        return _sorted_cut(x, ks, ps)
    vals, order = torch.topk(x, width, dim=-1)
    # The candidates hold a row's whole cut if its top-k fits in them, or if their share of the
    # row's mass reaches p; rows with neither filter are left as they are.
    lse = torch.where(ks <= width, vals.logsumexp(dim=-1), x.logsumexp(dim=-1))
    mass = (vals - lse.unsqueeze(1)).exp().sum(dim=-1)
    untouched = (ks >= vocab) & (ps >= 1.0)
    cut = _cut_sorted(vals, ks, ps, lse)
    out = torch.full_like(x, float("-inf")).scatter_(1, order, cut)
    out = torch.where(untouched.unsqueeze(1), x, out)
    # Rows whose nucleus is wider are sorted whole. The choice depends on the row alone, so a
    # seeded request draws the same token whatever else shares its batch.
    wide = (~((ks <= width) | (mass >= ps) | untouched)).nonzero().flatten()
    if len(wide):
        out[wide] = _sorted_cut(x[wide], ks[wide], ps[wide])
    return out


def _sorted_cut(x: torch.Tensor, ks: torch.Tensor, ps: torch.Tensor) -> torch.Tensor:
    """Top-k then top-p with a full sort of every row."""
    import torch

    sorted_x, order = x.sort(dim=-1, descending=True)
    cut = _cut_sorted(sorted_x, ks, ps, None)
    return torch.empty_like(x).scatter_(1, order, cut)


def _cut_sorted(
    sorted_x: torch.Tensor,
    ks: torch.Tensor,
    ps: torch.Tensor,
    lse: torch.Tensor | None,
) -> torch.Tensor:
    """Top-k then top-p on logits sorted in descending order (or a row-prefix of them).

    ``lse`` is each row's log-sum-exp after top-k when ``sorted_x`` is only a prefix of the row.
    """
    import torch

    ranks = torch.arange(sorted_x.shape[1], device=sorted_x.device).unsqueeze(0)
    sorted_x = sorted_x.masked_fill(ranks >= ks.unsqueeze(1), float("-inf"))
    if lse is None:
        sorted_p = torch.softmax(sorted_x, dim=-1)
    else:
        sorted_p = (sorted_x - lse.unsqueeze(1)).exp()
    mass_before = sorted_p.cumsum(dim=-1) - sorted_p
    # A token is in the nucleus while the mass of the tokens before it is still below p; rows
    # with p = 1 are exempt because rounding can push the cumulative sum past 1.
    drop = (mass_before >= ps.unsqueeze(1)) & (ps < 1.0).unsqueeze(1)
    drop[:, 0] = False
    return sorted_x.masked_fill(drop, float("-inf"))


def _exponential_noise(
    probs: torch.Tensor,
    params: Sequence[SamplingSettings],
    output_counts: Sequence[int],
    greedy: list[bool],
) -> torch.Tensor:
    """Exponential(1) noise per row; a seeded row's depends only on (seed, output count, vocab)."""
    import torch

    q = torch.empty_like(probs)
    seeded = [
        (i, p.seed, count)
        for i, (p, g, count) in enumerate(zip(params, greedy, output_counts, strict=True))
        if p.seed is not None and not g
    ]
    if len(seeded) < len(params):
        _fill_exponential(q, None)
    if seeded:
        # One generator, reseeded per row: a CUDA launch captures the seed when it is queued.
        gen = torch.Generator(device=probs.device)
        for i, seed, count in seeded:
            gen.manual_seed(seed_for_step(seed, count))
            _fill_exponential(q[i], gen)
    # The noise can be exactly 0, and 0 / 0 would let argmax pick a masked token.
    return q.clamp_(min=torch.finfo(q.dtype).tiny)


def _fill_exponential(t: torch.Tensor, gen: torch.Generator | None) -> None:
    """Fill ``t`` with Exponential(1) noise in place."""
    if t.device.type == "cpu":
        # -log(U) is Exponential(1); on the CPU it is ~5x faster than exponential_ (which draws
        # in double precision).
        t.uniform_(generator=gen).log_().neg_()
    else:
        t.exponential_(generator=gen)
