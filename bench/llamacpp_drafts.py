"""What prompt-lookup drafts would give the default llama.cpp backend on real agent turns.

A measurement, not a feature. The agent turns of ``bench/speculation.py`` (the model calls of
the first tasks of ``evals/basic.yaml``, captured through the loop on the engine, greedy) are
decoded with llama-cpp-python the way ``LlamaCppDecoder`` decodes them: the same prompt tokens
and the same sampler chain (greedy, under the lazy tool-call grammar). Two arms, run
alternately: one token per eval, and up to ``k`` tokens drafted from the sequence's own history
(the engine's n-gram lookup, ``backends.engine.core.speculation.propose_ngram``) and checked in
one eval that returns logits for every row; each drafted token is kept while the sampler picks
it, and the first pick that differs is the next token. Stop strings are not applied: each call
runs to its end of generation or ``--max-tokens``, in both arms alike.

It prints decode tokens/s both ways (after each call's prompt), the share of drafted tokens
kept, and how many calls gave the same tokens both ways: llama.cpp computes an eval of several
rows in another order than an eval of one, so its logits differ a little and a near tie can
flip. Run by hand:

    PYTHONPATH=. python bench/llamacpp_drafts.py --tasks 10 --k 3
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speculation import Turn, capture


@dataclass(slots=True)
class Call:
    """One decoded call: its tokens, the seconds after its prompt (and of them, in the sampler:
    the grammar and the pick), evals, drafted and kept."""

    tokens: list[int]
    seconds: float
    sampling: float
    evals: int
    drafted: int
    kept: int


def decode_call(decoder: Any, llm: Any, turn: Turn, k: int, max_tokens: int) -> Call:
    """``turn`` decoded greedily from a fresh context, drafting up to ``k`` tokens per eval."""
    from llama_cpp._internals import LlamaBatch

    from backends.engine.core.speculation import propose_ngram
    from backends.llamacpp.backend import _is_eog

    prompt = decoder._tokenize(llm, turn.prompt)
    llm.reset()
    llm.eval(prompt)
    sampler = decoder._sampler(llm, turn.request, turn.tools)
    batch = LlamaBatch(n_tokens=k + 1, embd=0, n_seq_max=1, verbose=False)
    history, out = list(prompt), []
    evals = drafted = kept = 0
    sampling = 0.0
    began = time.perf_counter()
    token = sampler.sample(llm._ctx, -1)
    while not _is_eog(llm, token) and len(out) < max_tokens:
        out.append(token)
        history.append(token)
        if len(out) == max_tokens:
            break
        room = min(k, max_tokens - len(out))
        draft = propose_ngram(history, room) if room > 0 else []
        rows, n_past = [token, *draft], llm.n_tokens
        batch.set_batch(rows, n_past, logits_all=True)
        llm._ctx.decode(batch)
        evals += 1
        drafted += len(draft)
        accepted = 0
        for row in range(len(rows)):
            picked = time.perf_counter()
            token = sampler.sample(llm._ctx, row)  # the grammar takes this pick
            sampling += time.perf_counter() - picked
            if row < len(draft) and token == draft[row] and not _is_eog(llm, token):
                accepted += 1
                out.append(token)
                history.append(token)
                continue
            break
        kept += accepted
        stored = 1 + accepted  # the token fed in and the drafts kept
        if stored < len(rows):
            llm._ctx.kv_cache_seq_rm(-1, n_past + stored, -1)
        llm.input_ids[n_past : n_past + stored] = rows[:stored]
        llm.n_tokens = n_past + stored
    return Call(out, time.perf_counter() - began, sampling, evals, drafted, kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", type=Path, default=Path("evals/basic.yaml"))
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--k", type=int, default=3, help="drafts per eval")
    parser.add_argument("--max-tokens", type=int, default=128, help="cap per replayed call")
    parser.add_argument("--rounds", type=int, default=2, help="each arm this many times")
    args = parser.parse_args()
    os.environ.setdefault("CLAWLOOP_DATA_DIR", tempfile.mkdtemp(prefix="clawloop-bench-"))
    _engine, turns = capture(args.suite, args.tasks)

    from backends.llamacpp.backend import load_llama
    from cli.config import load_settings
    from cli.wiring import build_backend

    backend: Any = build_backend(load_settings({"backend": "llamacpp"}))
    decoder = backend.decoder
    loaded = load_llama(
        decoder.model_path, decoder.n_ctx, decoder.threads, decoder.extra_buffers, decoder.adapter
    )
    print(f"llama-cpp-python, {decoder.threads} threads, {len(turns)} calls", flush=True)
    with loaded.lock:
        arms: dict[int, list[list[Call]]] = {0: [], args.k: []}
        for _ in range(args.rounds):
            for k in arms:
                calls = [decode_call(decoder, loaded.llm, t, k, args.max_tokens) for t in turns]
                arms[k].append(calls)
    for k, rounds in arms.items():
        rates = [sum(len(c.tokens) for c in r) / sum(c.seconds for c in r) for r in rounds]
        last = rounds[-1]
        line = f"  {'one token per eval' if k == 0 else f'k={k}':<20}"
        line += " ".join(f"{rate:6.1f}" for rate in rates) + " tok/s"
        tokens, evals = sum(len(c.tokens) for c in last), sum(c.evals for c in last)
        sampling = sum(c.sampling for c in last)
        per_token = sampling / tokens * 1e3
        line += f"   {tokens} tokens in {evals} evals, sampler {per_token:.2f} ms a token"
        if k:
            drafted, kept = sum(c.drafted for c in last), sum(c.kept for c in last)
            same = sum(a.tokens == b.tokens for a, b in zip(arms[0][-1], last, strict=True))
            line += f"   kept {kept}/{drafted} drafted   same tokens {same}/{len(last)} calls"
        print(line, flush=True)


if __name__ == "__main__":
    main()
