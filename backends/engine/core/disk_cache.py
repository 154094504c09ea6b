"""A prefix KV cache on disk: full prompt blocks kept across processes.

Each file holds one full block's keys and values for every layer, named by the block's chained
hash (the block manager's) in a folder named by a digest of everything the values depend on:
the model file, the adapter, the weight storage, the KV and activation dtypes, the block size,
the torch version and the file format. A file carries that digest, its hash, its tokens, its
length and a CRC of its values; one that disagrees on any of them (truncated, corrupt, written
for another model) is deleted and read as a miss, never as data.

Reads happen on the step thread when a sequence is admitted (a hit costs a file read instead of
a prefill). Writes go through one writer thread: the step thread only copies the blocks out of
the pool, and drops them when the writer is too far behind. Files are written to a temporary
name and renamed into place, so a reader never sees half a file; the folder is capped by deleting
the least recently used files (a hit refreshes a file's mtime). The cache itself deals in bytes;
Keying the cache for a runner and moving blocks in and out of its pool take torch, so they live
with the runner (:mod:`backends.engine.model.kv_transfer`).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import queue
import struct
import threading
import time
import weakref
import zlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.host import cache_root

FORMAT_VERSION = 1
MAGIC = b"CLKV"
# magic, format version, key digest, block hash, tokens in the block, value bytes, CRC32 of them
_HEADER = struct.Struct("<4sI16sQIQI")
DEFAULT_MAX_BYTES = 1 << 30
# Bytes copied out of the pool and not written yet; past this, new blocks are not saved.
MAX_PENDING_BYTES = 256 << 20
EVICT_TO = 0.9  # evicting stops at this share of the cap, so not every write rescans
STALE_TEMP_SECONDS = 3600.0  # a temporary file this old was left by a process that died
EXIT_FLUSH_SECONDS = 10.0  # how long a process waits at exit for its queued blocks


def default_directory() -> Path:
    """``kv`` in clawloop's cache folder (:func:`agent.host.cache_root`)."""
    return cache_root() / "kv"


@dataclass(slots=True)
class DiskCacheStats:
    """What the disk cache did in this process, in blocks."""

    hits: int = 0  # blocks read back into the pool
    rejected: int = 0  # files found but unusable (corrupt, truncated, another key): deleted
    written: int = 0
    dropped: int = 0  # blocks not saved because the writer was behind or the disk failed
    evicted: int = 0


class DiskKVCache:
    """Full KV blocks on disk, keyed by chained block hash under one model key."""

    def __init__(
        self,
        directory: Path,
        key: str,
        block_size: int,
        block_bytes: int,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.root = Path(directory)
        self.key = key
        self.key_digest = hashlib.blake2b(key.encode(), digest_size=16).digest()
        self.folder = self.root / self.key_digest.hex()
        self.block_size = block_size
        self.block_bytes = block_bytes
        self.max_bytes = max_bytes
        self.stats = DiskCacheStats()
        self._values_at = _HEADER.size + 8 * block_size
        self._file_bytes = self._values_at + block_bytes
        self._known: set[int] = set()  # hashes stored (or queued) as far as this process knows
        self._queue: queue.SimpleQueue[tuple[int, tuple[int, ...], Any] | None] = (
            queue.SimpleQueue()
        )
        self._pending = 0  # blocks queued and not written yet
        self._pending_bytes = 0
        self._done = threading.Condition()
        self._writer: threading.Thread | None = None
        self._total: int | None = None  # bytes under root, as of the last scan plus our writes

    # --- the step thread ---------------------------------------------------------------------

    def contains(self, block_hash: int) -> bool:
        """Whether a file for ``block_hash`` exists (it may still turn out unusable)."""
        return block_hash in self._known or self._path(block_hash).is_file()

    def read(self, block_hash: int, token_ids: Sequence[int]) -> memoryview | None:
        """The block's stored values, or None if the file is missing or unusable (then deleted)."""
        path = self._path(block_hash)
        data = bytearray(self._file_bytes + 1)  # one byte more: a longer file is caught too
        try:
            with open(path, "rb") as file:  # buffered: readinto loops until full or at the end
                size = file.readinto(data)
        except OSError:
            self._known.discard(block_hash)
            return None
        values = self._check(memoryview(data)[:size], block_hash, token_ids)
        if values is None:
            self.stats.rejected += 1
            self._known.discard(block_hash)
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # least recently *used*: a hit keeps the file
        self._known.add(block_hash)
        self.stats.hits += 1
        return values

    def wants(self, block_hash: int) -> bool:
        """Whether ``block_hash`` is worth saving: not on disk, not queued."""
        if block_hash in self._known:
            return False
        if self._path(block_hash).is_file():
            self._known.add(block_hash)
            return False
        return True

    def room(self) -> int:
        """How many more blocks may be queued now without going past the writer's backlog."""
        return max(0, (MAX_PENDING_BYTES - self._pending_bytes) // self.block_bytes)

    def put(self, entries: Sequence[tuple[int, Sequence[int]]], values: Sequence[Any]) -> None:
        """Queue blocks ``(hash, tokens)`` with their values (buffers) for the writer thread."""
        for (block_hash, tokens), buffer in zip(entries, values, strict=True):
            if len(memoryview(buffer).cast("B")) != self.block_bytes:
                raise ValueError(f"a block's values are not {self.block_bytes} bytes")
            if self._pending_bytes + self.block_bytes > MAX_PENDING_BYTES:
                self.stats.dropped += 1
                continue
            self._known.add(block_hash)
            with self._done:
                self._pending += 1
                self._pending_bytes += self.block_bytes
            self._queue.put((block_hash, tuple(tokens), buffer))
        self._start_writer()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued block is written; False if ``timeout`` ran out first."""
        with self._done:
            return self._done.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float = EXIT_FLUSH_SECONDS) -> None:
        """Write what is queued (waiting up to ``timeout``) and stop the writer thread."""
        self.flush(timeout)
        if self._writer is not None:
            self._queue.put(None)
            self._writer = None

    # --- files -------------------------------------------------------------------------------

    def _path(self, block_hash: int) -> Path:
        return self.folder / f"{block_hash:016x}.kv"

    def _check(
        self, data: memoryview, block_hash: int, token_ids: Sequence[int]
    ) -> memoryview | None:
        if len(data) != self._file_bytes:
            return None
        magic, version, key, stored_hash, num_tokens, num_bytes, crc = _HEADER.unpack_from(data)
        if (magic, version, key, stored_hash, num_tokens, num_bytes) != (
            MAGIC,
            FORMAT_VERSION,
            self.key_digest,
            block_hash,
            self.block_size,
            self.block_bytes,
        ):
            return None
        # The hash is 64 bits: the tokens themselves guard against a collision, as in memory.
        if data[_HEADER.size : self._values_at] != array("q", token_ids).tobytes():
            return None
        values = data[self._values_at :]
        if zlib.crc32(values) != crc:
            return None
        return values

    def _write(self, block_hash: int, tokens: tuple[int, ...], buffer: Any) -> int:
        values = memoryview(buffer).cast("B")
        path = self._path(block_hash)
        header = _HEADER.pack(
            MAGIC,
            FORMAT_VERSION,
            self.key_digest,
            block_hash,
            len(tokens),
            len(values),
            zlib.crc32(values),
        )
        temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(header)
                file.write(array("q", tokens).tobytes())
                file.write(values)
            # No fsync: a file cut short by a crash fails its length or CRC check and is a miss.
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise
        return self._file_bytes

    # --- the writer thread -------------------------------------------------------------------

    def _start_writer(self) -> None:
        if self._writer is None:
            self._writer = threading.Thread(
                target=self._write_loop, name="clawloop-kv-writer", daemon=True
            )
            self._writer.start()
            _WRITING.add(self)

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            block_hash, tokens, buffer = item
            written = 0
            try:
                self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
                if self._total is None:
                    self._total = self._scan_and_evict(self.max_bytes)
                written = self._write(block_hash, tokens, buffer)
                self.stats.written += 1
            except OSError:  # a full or read-only disk costs the cache, never the request
                self.stats.dropped += 1
                self._known.discard(block_hash)
            del buffer  # the pool copy can go now
            if self._total is not None:
                self._total += written
                if self._total > self.max_bytes:
                    with contextlib.suppress(OSError):
                        self._total = self._scan_and_evict(int(self.max_bytes * EVICT_TO))
            with self._done:
                self._pending -= 1
                self._pending_bytes -= self.block_bytes
                self._done.notify_all()

    def _scan_and_evict(self, limit: int) -> int:
        """Delete the least recently used files under root until it holds ``limit`` bytes."""
        now = time.time()
        files: list[tuple[float, int, str]] = []
        for sub in os.scandir(self.root):
            if not sub.is_dir(follow_symlinks=False):
                continue
            for entry in os.scandir(sub.path):
                try:
                    stat = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # deleted meanwhile by another process
                if entry.name.endswith(".tmp"):
                    if now - stat.st_mtime > STALE_TEMP_SECONDS:
                        with contextlib.suppress(OSError):
                            os.unlink(entry.path)
                    continue
                files.append((stat.st_mtime, stat.st_size, entry.path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= limit:
                break
            with contextlib.suppress(OSError):
                os.unlink(path)
                self.stats.evicted += 1
                self._known.discard(int(Path(path).stem, 16) if path.endswith(".kv") else -1)
            total -= size
        return total


# Caches with a writer thread; at exit each gets a few seconds to write what it has queued.
_WRITING: weakref.WeakSet[DiskKVCache] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    deadline = time.monotonic() + EXIT_FLUSH_SECONDS
    for cache in list(_WRITING):
        cache.flush(max(0.0, deadline - time.monotonic()))
