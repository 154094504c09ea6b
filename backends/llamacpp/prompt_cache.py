"""llama.cpp's KV cache of recent prompts, kept on disk so a new process starts from it.

Each ``agent run`` is a new process, so llama.cpp's in-memory prefix reuse starts empty and the
first prompt (system prompt, tool schemas, examples and the task: about 900 tokens for the
small-model profile) is prefilled from scratch, about 6 s on two cores. After a prompt is
prefilled, its sequence state (the KV of every prompt token, ``llama_state_seq_get_data``) is
written here with the prompt's token ids; a process whose context is still empty loads the
entry sharing the longest prefix with its prompt and computes only the rest.

Entries live in a folder keyed by the model's and the adapter's identity, the context size and
the llama.cpp version. Each file holds a header (the key, the tokens, the state's length and
SHA-256) and the state; a file that does not match is removed and treated as a miss, and the
state is only handed to llama.cpp after its checksum matched. Only the ``KEEP`` most recently
used entries stay.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.host import cache_root
from backends.local.cache_files import file_identity

FORMAT_VERSION = 1
KEEP = 8
MIN_SHARED = 64  # a shorter shared prefix is not worth reading a file for
SUFFIX = ".state"
_log = logging.getLogger(__name__)


def folder_key(model: Path, adapter: Path | None, n_ctx: int, version: str) -> str:
    """A digest of what a prompt's KV depends on besides its tokens."""
    spec = [FORMAT_VERSION, file_identity(model), file_identity(adapter), n_ctx, version]
    return hashlib.sha256(json.dumps(spec).encode()).hexdigest()[:24]


@dataclass(slots=True)
class _Entry:
    path: Path
    tokens: list[int]


class PromptStateCache:
    """Saved prompt states for one model: find, load and save them."""

    def __init__(self, key: str, folder: Path | None = None, keep: int = KEEP) -> None:
        self.key = key
        self.folder = (folder or cache_root() / "llama") / key
        self.keep = keep

    def load_best(self, llm: Any, tokens: list[int]) -> int:
        """Restore the saved state sharing the most leading tokens with ``tokens`` into the
        (empty) context of ``llm``; returns how many tokens it holds (0: nothing usable)."""
        best: _Entry | None = None
        best_len = 0
        for entry in self._entries():
            shared = _shared(entry.tokens, tokens)
            if shared > best_len:
                best, best_len = entry, shared
        if best is None or best_len < MIN_SHARED:
            return 0
        state = self._read_state(best)
        if state is None:
            return 0
        llama_cpp = _llama_cpp()
        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, buffer, len(state), 0) != len(state):
            llm.reset()
            return 0
        n = len(best.tokens)
        llm.input_ids[:n] = best.tokens
        llm.n_tokens = n
        os.utime(best.path)
        return n

    def save(self, llm: Any, tokens: list[int]) -> None:
        """Write the context's state for ``tokens`` (all computed), unless an entry holds them."""
        if any(entry.tokens == tokens for entry in self._entries()):
            return
        llama_cpp = _llama_cpp()
        size = llama_cpp.llama_state_seq_get_size(llm._ctx.ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(llm._ctx.ctx, buffer, size, 0)
        state = bytes(buffer)[:written]
        header = {
            "version": FORMAT_VERSION,
            "key": self.key,
            "tokens": tokens,
            "length": len(state),
            "sha256": hashlib.sha256(state).hexdigest(),
        }
        name = hashlib.sha256(json.dumps(tokens).encode()).hexdigest()[:32]
        temp: str | None = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle, temp = tempfile.mkstemp(dir=self.folder, prefix=".writing-", suffix=SUFFIX)
            with os.fdopen(handle, "wb") as out:
                out.write(json.dumps(header).encode() + b"\n")
                out.write(state)
            os.replace(temp, self.folder / f"{name}{SUFFIX}")
            temp = None
        except OSError as exc:
            _log.warning("could not save the prompt state in %s: %s", self.folder, exc)
        finally:
            if temp is not None:
                Path(temp).unlink(missing_ok=True)
        self._prune()

    def _entries(self) -> list[_Entry]:
        entries = []
        for path in self.folder.glob(f"*{SUFFIX}"):
            header = _header(path)
            if header is None or header.get("key") != self.key:
                path.unlink(missing_ok=True)
                continue
            entries.append(_Entry(path, [int(t) for t in header["tokens"]]))
        return entries

    def _read_state(self, entry: _Entry) -> bytes | None:
        try:
            with entry.path.open("rb") as handle:
                header = json.loads(handle.readline())
                state = handle.read()
        except (OSError, ValueError):
            state, header = b"", {}
        if len(state) != header.get("length") or (
            hashlib.sha256(state).hexdigest() != header.get("sha256")
        ):
            _log.warning("ignoring the damaged prompt state %s", entry.path)
            entry.path.unlink(missing_ok=True)
            return None
        return state

    def _prune(self) -> None:
        entries = sorted(self.folder.glob(f"*{SUFFIX}"), key=_mtime, reverse=True)
        for stale in entries[self.keep :]:
            stale.unlink(missing_ok=True)


def _header(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as handle:
            header = json.loads(handle.readline())
    except (OSError, ValueError):
        return None
    if not isinstance(header, dict) or header.get("version") != FORMAT_VERSION:
        return None
    return header


def _shared(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _llama_cpp() -> Any:
    import llama_cpp

    return llama_cpp
