"""A deterministic pure-Python model runner for testing the engine without a model.

It keeps a real paged "KV cache" (slot -> (token, position)) written through ``slot_mapping``
and reads each sequence's context back through its block table, so the next token depends on
what the paging actually stored: a wrong block, slot or shared block changes the output.
"""

from __future__ import annotations

import hashlib
import random
import time
from array import array

from backends.engine.core.batch import StepBatch
from backends.engine.core.params import SamplingParams

EOS = 256
SPECIAL = 257  # never sampled, decodes to nothing


class FakeTokenizer:
    """Byte-level: ids 0-255 are bytes, 256 is the end token, 257 a special token."""

    vocab_size = 258
    eos_token_ids = [EOS]  # noqa: RUF012 - a test double

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


def next_token(
    context: list[int], params: SamplingParams, output_count: int, eos_every: int
) -> int:
    """The fake model: a hash of the whole context picks a printable ASCII byte or the end token."""
    digest = int.from_bytes(
        hashlib.blake2b(array("q", context).tobytes(), digest_size=8).digest(), "little"
    )
    if params.temperature > 0.0:
        seed = params.seed if params.seed is not None else random.getrandbits(32)
        digest ^= random.Random(f"{seed}:{output_count}").getrandbits(64)
    if eos_every and digest % eos_every == 0:
        return EOS
    return 32 + digest % 95


def reference_generate(prompt: list[int], params: SamplingParams, eos_every: int = 0) -> list[int]:
    """What the engine must produce for ``prompt``: the fake model run without any paging."""
    tokens = list(prompt)
    out: list[int] = []
    while len(out) < params.max_tokens:
        token = next_token(tokens, params, len(out), eos_every)
        tokens.append(token)
        out.append(token)
        if token == EOS and not params.ignore_eos:
            break
    return out


class FakeRunner:
    """Implements ``ModelRunner.execute`` over a dict-backed paged cache."""

    def __init__(
        self, num_blocks: int = 64, block_size: int = 4, eos_every: int = 0, delay: float = 0.0
    ) -> None:
        self.num_blocks = num_blocks
        self.delay = delay  # seconds per step, as a forward pass takes: lets threads overlap
        self.block_size = block_size
        self.eos_every = eos_every
        self.tokenizer = FakeTokenizer()
        self.cache: dict[int, tuple[int, int]] = {}
        self.batches: list[StepBatch] = []
        self.tokens_computed = 0
        self.blocks_loaded = 0

    def execute(self, batch: StepBatch) -> list[int]:
        self.batches.append(batch)
        if self.delay:
            time.sleep(self.delay)
        self.tokens_computed += len(batch.input_ids)
        limit = self.num_blocks * self.block_size
        for slot, token, position in zip(
            batch.slot_mapping, batch.input_ids, batch.positions, strict=True
        ):
            if not 0 <= slot < limit:
                raise RuntimeError(f"slot {slot} is outside the cache")
            self.cache[slot] = (token, position)
        # Logits only exist for tokens computed in this step: a sequence with none cannot sample.
        if any(n < 1 for n in batch.query_lens):
            raise RuntimeError(f"a sequence was scheduled with no new tokens: {batch.query_lens}")
        out = []
        for row, index in enumerate(batch.sample_indices):
            context = self._read(batch.block_tables[index], batch.context_lens[index])
            out.append(
                next_token(context, batch.sampling[row], batch.output_counts[row], self.eos_every)
            )
        return out

    def save_blocks(self, block_ids: list[int]) -> list[bytes]:
        """Each block's (token, position) pairs, as ``ModelRunner.save_blocks`` gives its K/V."""
        bs = self.block_size
        return [
            array("q", [x for s in range(b * bs, (b + 1) * bs) for x in self.cache[s]]).tobytes()
            for b in block_ids
        ]

    def load_blocks(self, block_ids: list[int], values: list[bytes]) -> None:
        """Write blocks made by :meth:`save_blocks` back into the cache."""
        bs = self.block_size
        self.blocks_loaded += len(block_ids)
        for block_id, raw in zip(block_ids, values, strict=True):
            pairs = array("q")
            pairs.frombytes(bytes(raw))
            for offset in range(bs):
                self.cache[block_id * bs + offset] = (pairs[2 * offset], pairs[2 * offset + 1])

    def _read(self, block_table: list[int], length: int) -> list[int]:
        bs = self.block_size
        context = []
        for position in range(length):
            token, stored_at = self.cache[block_table[position // bs] * bs + position % bs]
            if stored_at != position:
                raise RuntimeError(f"slot for position {position} holds position {stored_at}")
            context.append(token)
        return context
