"""Paged KV-cache bookkeeping: fixed-size blocks, ref counts, an LRU free list, a prefix cache.

A block holds the keys and values of ``block_size`` consecutive tokens of one or more sequences
(more than one only when they share the same prefix). A full block is registered under a hash
chained over every token before it, so two sequences with the same first ``k * block_size`` tokens
can share those ``k`` blocks. A freed block keeps its hash and sits in the free list until it is
reused, so a later request can still revive it; the free list is ordered by release time and the
least recently released block is reused first.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from backends.engine.core.sequence import Sequence

try:  # xxhash is faster; hashlib is always there and the stored tokens guard against collisions
    import xxhash

    HASH_NAME = "xxh3_64"

    def _digest(data: bytes) -> int:
        return int(xxhash.xxh3_64_intdigest(data))

except ImportError:  # pragma: no cover - depends on the environment
    HASH_NAME = "blake2b_64"

    def _digest(data: bytes) -> int:
        return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def hash_block(parent: int | None, token_ids: Iterable[int]) -> int:
    """The chained hash of one full block: its parent's hash and its own token ids."""
    head = (parent if parent is not None else 0xFFFF_FFFF_FFFF_FFFF).to_bytes(8, "little")
    return _digest(head + array("q", token_ids).tobytes())


@dataclass(slots=True)
class Block:
    """One KV-cache block: who uses it and, once full and registered, which tokens it holds."""

    block_id: int
    ref_count: int = 0
    hash: int | None = None
    token_ids: tuple[int, ...] = ()


class BlockManager:
    """Hands out KV-cache blocks to sequences and keeps the prefix cache."""

    def __init__(
        self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True
    ) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError(
                f"need at least one block of at least one token, got {num_blocks}x{block_size}"
            )
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self.hash_to_block: dict[int, int] = {}

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def num_free_blocks(self) -> int:
        """Blocks no sequence holds (cached ones included: they can be evicted)."""
        return len(self.free)

    def blocks_for(self, num_tokens: int) -> int:
        """How many blocks ``num_tokens`` tokens take."""
        return -(-num_tokens // self.block_size)

    def find_cached_prefix(self, seq: Sequence) -> list[int]:
        """Cached blocks holding ``seq``'s leading tokens; changes nothing.

        The hit never covers the last token: its logits are needed, so it is always recomputed.
        """
        if not self.enable_prefix_caching:
            return []
        hits: list[int] = []
        for index in range((seq.num_tokens - 1) // self.block_size):
            block_id = self.hash_to_block.get(self.block_hash(seq, index))
            if block_id is None:
                break
            # A hash collision must never give wrong output: compare the stored tokens.
            if self.blocks[block_id].token_ids != tuple(seq.block_tokens(index, self.block_size)):
                break
            hits.append(block_id)
        return hits

    def allocate_slots(
        self, seq: Sequence, num_new_tokens: int, cached: list[int] | None = None
    ) -> bool:
        """Make room for ``num_new_tokens`` more tokens of ``seq``; False (no change) if full.

        ``cached`` are prefix hits from :meth:`find_cached_prefix`, taken by a sequence that holds
        no blocks yet; they count as computed tokens.
        """
        cached = cached or []
        if cached and seq.block_table:
            raise ValueError("prefix hits can only be taken by a sequence that holds no blocks")
        computed = seq.num_computed_tokens + len(cached) * self.block_size
        needed = self.blocks_for(computed + num_new_tokens) - len(seq.block_table) - len(cached)
        revived = sum(1 for b in cached if self.blocks[b].ref_count == 0)
        if max(needed, 0) + revived > len(self.free):
            return False
        for block_id in cached:
            block = self.blocks[block_id]
            if block.ref_count == 0:
                del self.free[block_id]
            block.ref_count += 1
        if cached:
            seq.block_table.extend(cached)
            seq.num_computed_tokens = computed
            seq.num_registered_blocks = len(cached)
        for _ in range(needed):
            seq.block_table.append(self._take_free_block())
        return True

    def cache_full_blocks(self, seq: Sequence) -> None:
        """Register ``seq``'s full computed blocks in the prefix cache (generated ones too)."""
        if not self.enable_prefix_caching:
            return
        num_full = min(seq.num_computed_tokens // self.block_size, len(seq.block_table))
        for index in range(seq.num_registered_blocks, num_full):
            block = self.blocks[seq.block_table[index]]
            block_hash = self.block_hash(seq, index)
            # A duplicate of an already cached block stays unregistered; the first copy serves hits.
            if block.hash is None and block_hash not in self.hash_to_block:
                block.hash = block_hash
                block.token_ids = tuple(seq.block_tokens(index, self.block_size))
                self.hash_to_block[block_hash] = block.block_id
        seq.num_registered_blocks = max(seq.num_registered_blocks, num_full)

    def free_blocks(self, seq: Sequence) -> None:
        """Release ``seq``'s blocks, tail first, so its last blocks are the first to be evicted."""
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self.free[block_id] = None
        seq.block_table.clear()
        seq.num_registered_blocks = 0

    def free_surplus_blocks(self, seq: Sequence) -> None:
        """Release the blocks past ``seq``'s tokens, taken for drafts the model rejected.

        They hold no full block of ``seq``'s tokens, so they were never offered to the prefix
        cache; the last kept block may still hold rejected keys past the sequence's end, which
        the next tokens overwrite before anything reads them.
        """
        keep = self.blocks_for(seq.num_tokens)
        while len(seq.block_table) > keep:
            block = self.blocks[seq.block_table.pop()]
            block.ref_count -= 1
            if block.ref_count == 0:
                self.free[block.block_id] = None

    def _take_free_block(self) -> int:
        """The least recently released free block, evicted from the prefix cache."""
        block_id, _ = self.free.popitem(last=False)
        block = self.blocks[block_id]
        if block.hash is not None:
            if self.hash_to_block.get(block.hash) == block_id:
                del self.hash_to_block[block.hash]
            block.hash = None
            block.token_ids = ()
        block.ref_count = 1
        return block_id

    def block_hash(self, seq: Sequence, index: int) -> int:
        """The chained hash of full block ``index`` of ``seq``, memoised on the sequence."""
        hashes = seq.block_hashes
        while len(hashes) <= index:
            i = len(hashes)
            parent = hashes[i - 1] if i else None
            hashes.append(hash_block(parent, seq.block_tokens(i, self.block_size)))
        return hashes[index]

    def check_invariants(self, live: Iterable[Sequence]) -> None:
        """Raise ``RuntimeError`` if the accounting is inconsistent with the live sequences."""
        holders: Counter[int] = Counter()
        for seq in live:
            table = seq.block_table
            if len(set(table)) != len(table):
                raise RuntimeError(f"sequence {seq.seq_id} holds a block twice: {table}")
            if len(table) < self.blocks_for(seq.num_computed_tokens):
                raise RuntimeError(f"sequence {seq.seq_id} has computed tokens outside its blocks")
            holders.update(table)
            for index, block_id in enumerate(table):
                stored = self.blocks[block_id]
                if stored.hash is not None and stored.token_ids != tuple(
                    seq.block_tokens(index, self.block_size)
                ):
                    raise RuntimeError(f"block {block_id} caches other tokens than {seq.seq_id}'s")
        for block in self.blocks:
            bid, refs = block.block_id, block.ref_count
            if refs != holders[bid]:
                raise RuntimeError(f"block {bid}: ref_count {refs}, held {holders[bid]} times")
            if (refs == 0) != (bid in self.free):
                raise RuntimeError(
                    f"block {bid}: ref_count {refs}, in free list: {bid in self.free}"
                )
            if block.hash is not None and (
                self.hash_to_block.get(block.hash) != bid or len(block.token_ids) != self.block_size
            ):
                raise RuntimeError(f"block {bid} has a hash the table does not map back")
        for block_hash, block_id in self.hash_to_block.items():
            if self.blocks[block_id].hash != block_hash:
                raise RuntimeError(f"hash table maps to block {block_id}, which holds another hash")
