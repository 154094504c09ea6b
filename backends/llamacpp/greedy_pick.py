"""Greedy picks under a llama.cpp grammar, the best token checked alone first.

llama.cpp's grammar sampler decides every candidate token against the grammar before the greedy
sampler takes the best of those left. Over the bundled model's 49,152 tokens that took about
5 ms of the 20 ms each token of an agent turn cost (``bench/llamacpp_drafts.py``). Greedy under
a grammar picks the best token the grammar allows, so when the best token of all is allowed, it
is the pick: it goes through the same grammar sampler alone, in an array of one candidate, and
only when the grammar refuses it does the chain decide every candidate, as before. Either way
the chain then accepts the pick (the grammar advances, a lazy one watches for its trigger), so
the grammar's state and the tokens are exactly those of the chain alone.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any


class GreedyUnderGrammar:
    """``sample(ctx, idx)`` for a llama-cpp-python ``LlamaSampler`` chain of a grammar sampler
    (plain or lazy) followed by the greedy one; the chain is kept, and freed with this object."""

    def __init__(self, chain: Any, n_vocab: int) -> None:
        import llama_cpp

        self._llama_cpp = llama_cpp
        self._chain = chain
        self._grammar = llama_cpp.llama_sampler_chain_get(chain.sampler, 0)
        self._n_vocab = n_vocab
        self.checked_alone = 0  # picks the grammar took as the best token of all
        self.decided_whole = 0  # picks the chain made over every candidate

    def sample(self, ctx: Any, idx: int = -1) -> int:
        """The greedy token of logits row ``idx`` that the grammar allows; the chain accepts it."""
        import numpy as np

        lib = self._llama_cpp
        row = lib.llama_get_logits_ith(ctx.ctx, idx)
        logits = np.ctypeslib.as_array(row, shape=(self._n_vocab,))
        best = int(logits.argmax())  # the first of ties, as the greedy sampler takes
        logit = float(logits[best])
        if not math.isnan(logit):
            one = lib.llama_token_data(best, logit, 0.0)
            array = lib.llama_token_data_array(ctypes.pointer(one), 1, -1, False)
            lib.llama_sampler_apply(self._grammar, ctypes.byref(array))
            if array.size == 1 and one.logit != -math.inf:
                lib.llama_sampler_accept(self._chain.sampler, best)
                self.checked_alone += 1
                return best
        self.decided_whole += 1
        return int(self._chain.sample(ctx, idx))
