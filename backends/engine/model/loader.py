"""Load a model for the engine from a .gguf file or a Hugging Face folder."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.errors import UserError
from backends.engine.config import ModelConfig, config_from_gguf, config_from_hf
from backends.engine.tokenizer import EngineTokenizer, tokenizer_from_folder, tokenizer_from_gguf

if TYPE_CHECKING:
    import torch

    from backends.engine.model.model import CausalLM
    from backends.engine.weights.quant import Weight
    from backends.engine.weights.weight_cache import CachedModel


@dataclass(slots=True)
class LoadedModel:
    """A model ready to run, with its config and tokenizer."""

    config: ModelConfig
    model: CausalLM
    tokenizer: EngineTokenizer


def default_dtype(device: str) -> torch.dtype:
    """Activations and KV cache: float32 on CPU (exact and fast enough there), else bfloat16."""
    import torch

    return torch.float32 if device == "cpu" else torch.bfloat16


# float32 on CPU where nothing faster holds the same weights: exact against the reference, and
# faster than int8/int4 for prefill and batches on a CPU without AVX-512 VNNI.
CPU_DEFAULT_WEIGHTS = "float32"


def default_weights(device: str, dtype: torch.dtype | None) -> str:
    """Weight storage when none is set: an explicit ``dtype`` keeps its meaning for weights."""
    if dtype is not None:
        return str(dtype).removeprefix("torch.")
    return CPU_DEFAULT_WEIGHTS if device == "cpu" else "bfloat16"


def file_weights(tensors: dict[str, Weight], storage: str, gguf: bool = True) -> str:
    """The default storage, once the file is read: ``int4`` where every projection is 4-bit
    groups in the file and the wide group kernel runs (AVX-512 VNNI); else ``int4-decode`` for
    a GGUF file where the C group kernel runs; else ``storage``.

    With the wide kernel the groups are the weights themselves (float32 would be them
    dequantized), every step runs faster on them than on float32 GEMM
    (``bench/wide_kernels.py``), and the model takes about a quarter of the memory; the parity
    tests hold int4 to the same reference. Without it, int4-decode keeps float32 GEMM for
    prompts and decodes on the file's groups, where the C kernel beats float32 GEMM.
    """
    from backends.engine.weights.quant import INT4_DECODE, GroupQuantized, group_kernel
    from backends.engine.weights.wide_groups import wide_kernel

    if storage != "float32":
        return storage
    projections = [v for k, v in tensors.items() if k.endswith("_proj.weight")]
    groups = bool(projections) and all(isinstance(v, GroupQuantized) for v in projections)
    if groups and wide_kernel() is not None:
        return "int4"
    return INT4_DECODE if gguf and group_kernel() is not None else storage


def load_model(
    path: Path,
    device: str = "cpu",
    dtype: torch.dtype | None = None,
    show_progress: bool = False,
    adapter: Path | None = None,
    weights: str | None = None,
    cache: bool = False,
) -> LoadedModel:
    """Read config, tokenizer and weights onto ``device``: norms in ``dtype`` (the activations'),
    projections stored as ``weights`` says (float32, bfloat16, int8 or int4; see
    :mod:`backends.engine.weights.quant`).

    ``adapter`` is a GGUF LoRA file merged into the weights of a .gguf model as they load.
    ``cache`` (CPU only) keeps what the load produced in the weight cache
    (:mod:`backends.engine.weights.weight_cache`) and starts from it when nothing changed since.
    """
    import torch

    from backends.engine.model.model import CausalLM
    from backends.engine.weights import weight_cache
    from backends.engine.weights.quant import check_weights

    path = Path(path).expanduser()
    storage = check_weights(weights or default_weights(device, dtype), device)
    chosen = weights is not None or dtype is not None or device != "cpu"
    dtype = dtype or default_dtype(device)
    if adapter is not None and not path.is_file():
        raise UserError(f"a LoRA adapter needs a .gguf base model, not {path}")
    if not path.exists():
        raise UserError(
            f"model path {path} does not exist: pass a .gguf file or a Hugging Face folder"
        )
    key = None
    source = None
    if cache and device == "cpu":
        key = weight_cache.cache_key(path, adapter, storage, str(dtype))
        source = weight_cache.load(key)
    if source is None:
        source = _read_source(path, device, dtype, storage, adapter, show_progress)
        if key is not None:
            weight_cache.store(key, source)
    if not chosen:
        # float32 and int4 read the same tensors (the file's groups, floats for the rest), so
        # the choice can wait for them and the weight cache serves both.
        storage = file_weights(dict(source.tensors), storage, gguf=path.is_file())
    with torch.device(device):
        model = CausalLM(source.config, dict(source.tensors), storage)
    model.eval()
    config, tokenizer = source.config, source.tokenizer
    del source
    _return_freed_memory()
    return LoadedModel(config, model, tokenizer)


def _read_source(
    path: Path,
    device: str,
    dtype: torch.dtype,
    storage: str,
    adapter: Path | None,
    show_progress: bool,
) -> CachedModel:
    """Config, tokenizer and the named tensors the model is built from, read from the file."""
    import torch

    from backends.engine.weights.quant import INT4_DECODE, QUANTIZED, float_weights
    from backends.engine.weights.weight_cache import CachedModel

    if path.is_dir():
        from backends.engine.weights.hf_weights import hf_total_bytes, iter_hf_weights

        config_file = path / "config.json"
        if not config_file.is_file():
            raise UserError(
                f"{path} has no config.json: pass a .gguf file or a Hugging Face folder"
            )
        config = config_from_hf(json.loads(config_file.read_text()))
        tokenizer = tokenizer_from_folder(path)
        total = hf_total_bytes(path)

        def read(report: Callable[[int], None]) -> Iterator[tuple[str, Weight]]:
            return iter_hf_weights(path, report)
    else:
        from backends.engine.weights.gguf_weights import gguf_total_bytes, iter_gguf_weights
        from backends.gguf.reader import read_gguf

        reader = read_gguf(path)
        config = config_from_gguf(reader)
        tokenizer = tokenizer_from_gguf(reader)
        total = gguf_total_bytes(reader)

        from backends.gguf.lora import read_adapter

        lora = read_adapter(adapter) if adapter is not None else None

        # int4-decode's decode steps run on the 4-bit blocks (quant.DualLinear); float32 on CPU
        # reads them as they are too (its float copy is their dequantized values), so the
        # default can still pick int4-decode or int4 and the weight cache serves all three.
        keep_4bit = storage in ("int4", INT4_DECODE) or (storage == "float32" and device == "cpu")

        def read(report: Callable[[int], None]) -> Iterator[tuple[str, Weight]]:
            return iter_gguf_weights(reader, config, report, lora, keep_4bit=keep_4bit)

    tensors: dict[str, Weight] = {}
    # Quantized projections are rounded from float32 values, so they load as float32 first.
    projection = torch.float32 if storage in QUANTIZED else getattr(torch, float_weights(storage))
    with _progress(f"loading {path.name}", total, show_progress) as report:
        for name, value in read(report):
            if not isinstance(value, torch.Tensor):
                tensors[name] = value  # 4-bit blocks, packed as they are
                continue
            # rope_freqs stays float32: it only shapes the rotary table, computed in float32.
            target = torch.float32 if name == "rope_freqs" else dtype
            if name.endswith(("_proj.weight", "embed_tokens.weight", "lm_head.weight")):
                target = projection
            tensors[name] = value.to(device=device, dtype=target)
    return CachedModel(config, tokenizer, tensors)


def _return_freed_memory() -> None:
    """Hand the float32 load-time copies back to the OS: glibc keeps freed heap pages resident."""
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        if libc is not None and hasattr(libc, "malloc_trim"):
            libc.malloc_trim(0)
    except OSError:
        pass  # not glibc: nothing to trim


@contextlib.contextmanager
def _progress(label: str, total: int, show: bool) -> Iterator[Callable[[int], None]]:
    """A rich progress bar over bytes read, or a no-op reporter."""
    if not show:
        yield lambda _n: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task(label, total=total)
        yield lambda n: progress.advance(task, n)
