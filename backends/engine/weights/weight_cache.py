"""A disk cache of a model as the engine loads it, so later starts skip decoding the file.

Reading the bundled GGUF means parsing its metadata, rebuilding the tokenizer and dequantizing
every tensor (and merging a LoRA adapter into it): about 5 s on two cores, on every
``agent run``. The result depends only on the files and the load settings, so the first load
writes it (config, tokenizer, and the tensors as the model is built from them) to one file under
the user's cache folder, and a later load with the same key maps that file instead.

The key pins the model's and the adapter's identity (resolved path, size and modification
time of every file read), the weight storage, the activation dtype and this format's version.
A file that fails to load, or whose recorded key differs, is a miss: it is removed and the model
loads from its source. Only the most recent ``KEEP`` entries stay on disk.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.host import cache_root
from backends.local.cache_files import file_identity

if TYPE_CHECKING:
    from backends.engine.config import ModelConfig
    from backends.engine.tokenizer import EngineTokenizer
    from backends.engine.weights.quant import Weight

FORMAT_VERSION = 3  # 2: float32 entries keep a GGUF's 4-bit blocks; 3: and LoRA factors
KEEP = 2  # entries kept on disk: the model with and without its adapter, say
SUFFIX = ".weights.pt"
# Small tensors (norms, biases, rotary factors) are copied out of the mapping, so the mapping of
# the whole file is released once the large ones have been consumed into the model's own layout.
_COPY_BELOW_BYTES = 1 << 20
_log = logging.getLogger(__name__)


def cache_dir() -> Path:
    """``weights`` in clawloop's cache folder (:func:`agent.host.cache_root`)."""
    return cache_root() / "weights"


def cache_key(model: Path, adapter: Path | None, storage: str, dtype: str) -> str:
    """A digest of everything the loaded tensors depend on."""
    spec = {
        "version": FORMAT_VERSION,
        "model": file_identity(model),
        "adapter": file_identity(adapter),
        "storage": storage,
        "dtype": dtype,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:32]


@dataclass(slots=True)
class CachedModel:
    """What a load produces before the model is built: config, tokenizer and named tensors."""

    config: ModelConfig
    tokenizer: EngineTokenizer
    tensors: dict[str, Weight]


def load(key: str, folder: Path | None = None) -> CachedModel | None:
    """The entry for ``key``, or None (a missing, unreadable or mismatched entry)."""
    import torch

    from backends.engine.config import ModelConfig
    from backends.engine.tokenizer import EngineTokenizer
    from backends.engine.weights.quant import GroupQuantized

    path = (folder or cache_dir()) / f"{key}{SUFFIX}"
    if not path.is_file():
        return None
    try:
        state = torch.load(path, mmap=True, weights_only=True)
        if state.get("version") != FORMAT_VERSION or state.get("key") != key:
            raise ValueError("the entry was written for another key or format")
        config = ModelConfig(**state["config"])
        tokenizer = EngineTokenizer.from_state(state["tokenizer"])
        tensors: dict[str, Weight] = {}
        for name, value in state["tensors"].items():
            small = value.nbytes < _COPY_BELOW_BYTES
            tensors[name] = value.clone() if small else value
        for name, parts in state["quantized"].items():
            tensors[name] = GroupQuantized(*parts)
    except Exception as exc:  # any damage to a cache file means: load from the source instead
        _log.warning("ignoring the weight cache entry %s: %s", path, exc)
        path.unlink(missing_ok=True)
        return None
    os.utime(path)  # most recently used
    return CachedModel(config, tokenizer, tensors)


def store(key: str, model: CachedModel, folder: Path | None = None) -> Path | None:
    """Write ``model`` as the entry for ``key`` (atomically); None if the disk refused it."""
    import torch

    from backends.engine.weights.quant import GroupQuantized

    folder = folder or cache_dir()
    plain: dict[str, torch.Tensor] = {}
    quantized: dict[str, tuple[torch.Tensor, ...]] = {}
    for name, value in model.tensors.items():
        if isinstance(value, GroupQuantized):
            parts: tuple[torch.Tensor, ...] = (value.q, value.scale, value.low)
            if value.down is not None and value.up is not None:
                parts += (value.down, value.up)
            quantized[name] = parts
        else:
            plain[name] = value
    state = {
        "version": FORMAT_VERSION,
        "key": key,
        "config": asdict(model.config),
        "tokenizer": model.tokenizer.to_state(),
        "tensors": plain,
        "quantized": quantized,
    }
    target = folder / f"{key}{SUFFIX}"
    temp: str | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=folder, prefix=".writing-", suffix=SUFFIX)
        with os.fdopen(handle, "wb") as out:
            torch.save(state, out)
        os.replace(temp, target)
        temp = None
    except OSError as exc:
        _log.warning("could not write the weight cache entry %s: %s", target, exc)
        return None
    finally:
        if temp is not None:
            Path(temp).unlink(missing_ok=True)
    prune(folder, keep=KEEP)
    return target


def prune(folder: Path, keep: int = KEEP) -> None:
    """Remove all but the ``keep`` most recently used entries."""
    entries = sorted(folder.glob(f"*{SUFFIX}"), key=_mtime, reverse=True)
    for stale in entries[keep:]:
        stale.unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
