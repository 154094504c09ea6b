"""The engine's model runner: owns weights and the paged KV cache, runs one step at a time."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.errors import UserError
from backends.engine.model.attention import (
    NATIVE_MAX_QUERY,
    NativeAttention,
    plan_cpu_attention,
    store_kv_reference,
)
from backends.engine.model.compute_thread import ComputeThread
from backends.engine.model.loader import load_model
from backends.engine.model.sampler import sample

if TYPE_CHECKING:
    import torch

    from backends.engine.config import ModelConfig
    from backends.engine.core.batch import StepBatch
    from backends.engine.core.engine_config import EngineConfig
    from backends.engine.tokenizer import EngineTokenizer

CPU_KV_CAP = 4 << 30
GRAPH_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# Fresh pages from the OS are zero, so a large cache needs no explicit zeroing (which would touch,
# and so commit, every page at once); small tensors may come from the heap and are zeroed.
_LAZY_ZERO_BYTES = 64 << 20


class ModelRunner:
    """One forward pass per engine step over every scheduled token, then sampling.

    Environment: CLAWLOOP_ENGINE_THREADS sets the CPU thread count (1 is far faster on a busy
    machine); CLAWLOOP_ENGINE_EAGER=1 turns off CUDA graphs. On CPU, ``dtype="bfloat16"``
    roughly doubles prompt throughput where the CPU has AVX512-BF16 (float32 is the default).
    """

    def __init__(self, config: EngineConfig) -> None:
        """Load ``config.model`` onto ``config.device`` and allocate its KV cache, as ``config``
        says (its model-side fields; the rest are the scheduler's).

        On CPU every tensor operation of the runner, loading included, runs on one compute
        thread (:mod:`backends.engine.model.compute_thread`), whichever thread calls it."""
        import torch

        if config.model is None:
            raise ValueError("a model runner needs EngineConfig.model: a .gguf file or a folder")
        threads = os.environ.get("CLAWLOOP_ENGINE_THREADS", "")
        if threads and config.device == "cpu":
            if not threads.isdigit() or int(threads) < 1:
                raise UserError(
                    f"CLAWLOOP_ENGINE_THREADS must be a positive number, not {threads!r}"
                )
            # One thread can beat two by far on a busy machine: every op ends in a barrier that
            # waits for the other thread to be scheduled again.
            torch.set_num_threads(int(threads))
        self.engine_config = config
        self._compute = ComputeThread() if config.device == "cpu" else None
        try:
            self._on_compute(self._setup, config, config.model)
        except BaseException:
            if self._compute is not None:  # no thread left behind by a runner never made
                self._compute.close()
            raise

    def _on_compute(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args) if self._compute is None else self._compute.run(fn, *args)

    def _setup(self, config: EngineConfig, model_path: Path) -> None:
        import torch

        device = config.device
        loaded = load_model(
            Path(model_path),
            device=device,
            dtype=_torch_dtype(config.dtype),
            show_progress=config.show_progress,
            adapter=config.adapter,
            weights=config.weights,
            cache=config.weight_cache,
        )
        self.model = loaded.model
        self.config: ModelConfig = loaded.config
        self.tokenizer: EngineTokenizer = loaded.tokenizer
        self.device = device
        block_size = config.block_size
        self.block_size = block_size
        self.dtype = self.model.dtype  # activations
        self.weights = self.model.storage
        native = None
        if config.native_attention and device == "cpu" and self.dtype == torch.float32:
            from backends.engine.weights.native.paged_decode import PagedDecode

            native = PagedDecode.available()
        half = native is not None and native.reads_half(
            self.config.num_kv_heads, self.config.head_dim
        )
        kv_dtype = _torch_dtype(config.kv_dtype)
        self.kv_dtype = kv_dtype or default_kv_dtype(self.dtype, self.weights, half)
        if self.kv_dtype not in (self.dtype, torch.float16) or (
            self.kv_dtype != self.dtype and not half
        ):
            raise UserError(
                f"a {str(self.kv_dtype).removeprefix('torch.')} KV cache needs "
                f"{str(self.dtype).removeprefix('torch.')} activations, or float16 beside "
                "float32 ones where the C attention kernel reads it (a CPU with F16C, at most "
                "1,024 key values per token): unset kv_dtype for the default"
            )
        self.scale = self.config.head_dim**-0.5
        per_block = block_size * self.config.kv_bytes_per_token(self.kv_dtype.itemsize)
        budget = config.kv_cache_bytes
        if budget is None:
            budget = self._default_kv_bytes()
        self.num_blocks = max(1, budget // per_block)
        cuda = device.startswith("cuda")
        # On CUDA one extra block, never handed out, absorbs the padding rows of captured graphs.
        total_blocks = self.num_blocks + (1 if cuda else 0)
        shape = (total_blocks, block_size, self.config.num_kv_heads, self.config.head_dim)
        lazy = (
            not cuda
            and total_blocks * per_block // (2 * self.config.num_layers) >= _LAZY_ZERO_BYTES
        )
        make = torch.empty if lazy else torch.zeros
        self.kv_caches = [
            (
                make(shape, dtype=self.kv_dtype, device=device),
                make(shape, dtype=self.kv_dtype, device=device),
            )
            for _ in range(self.config.num_layers)
        ]
        self._sample = sample
        self._native = native
        self._fused = None
        if self._native is not None and config.fused_step:
            from backends.engine.model.fused_step import bind_fused_step

            self._fused = bind_fused_step(self.model, self.kv_caches, self.scale)
        self._kernels = _load_triton_kernels() if cuda else None
        self._graphs: Any = None
        if self._kernels is not None and os.environ.get("CLAWLOOP_ENGINE_EAGER") != "1":
            self._graphs = DecodeGraphs(self, GRAPH_BATCH_SIZES)

    def _default_kv_bytes(self) -> int:
        import torch

        if self.device.startswith("cuda"):
            free, _total = torch.cuda.mem_get_info(torch.device(self.device))
            return int(free * 0.8)
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return min(CPU_KV_CAP, ram // 4)

    def execute(self, batch: StepBatch) -> list[int]:
        """Run every scheduled token in one forward; return a token per entry of sample_indices."""
        return self._on_compute(self._execute, batch)

    def _execute(self, batch: StepBatch) -> list[int]:
        import torch

        if not batch.input_ids:
            return []
        with torch.inference_mode():
            ends = _cumulative(batch.query_lens)
            rows = [ends[i + 1] - 1 for i in batch.sample_indices]
            hidden = self._forward(batch, torch.tensor(rows, dtype=torch.long, device=self.device))
            if not batch.sample_indices:
                return []
            logits = self.model.logits(hidden)
            bitmask = self._bitmask(batch.constraints, logits.shape[1])
            tokens = self._sample(logits, batch.sampling, batch.output_counts, bitmask)
            return [int(t) for t in tokens.cpu().tolist()]  # the one device-to-host copy per step

    def execute_speculative(self, batch: StepBatch) -> list[list[int]]:
        """Like :meth:`execute` for a batch with drafts: per sampled sequence, the drafts the
        model kept and one token of its own (:mod:`backends.engine.model.verify`)."""
        from backends.engine.model.verify import execute_speculative

        return self._on_compute(execute_speculative, self, batch)

    def _forward(self, batch: StepBatch, rows: torch.Tensor | None = None) -> torch.Tensor:
        """The hidden states of the step's token rows ``rows`` (those sampled from), or of every
        token."""
        import torch

        if self._graphs is not None and self._graphs.fits(batch):
            hidden = self._graphs.run(batch)
            return hidden if rows is None else hidden[rows]
        device = self.device
        ids = torch.tensor(batch.input_ids, dtype=torch.long).to(device, non_blocking=True)
        positions = torch.tensor(batch.positions, dtype=torch.long).to(device, non_blocking=True)
        slots = torch.tensor(batch.slot_mapping, dtype=torch.long).to(device, non_blocking=True)
        attention: Callable[..., torch.Tensor]
        if self._kernels is not None:
            attention = KernelAttention.from_batch(batch, self._kernels, self.scale, device)
        else:
            plan = plan_cpu_attention(
                batch.query_lens,
                batch.context_lens,
                batch.block_tables,
                self.block_size,
                self.scale,
                device,
                mask_dtype=self.dtype,
                # prompt chunks in the C kernel too, in tiles: as fast as SDPA or faster at the
                # lengths of a chunk (bench/prompt_attention.py), and the same arithmetic as a
                # token's decode
                native=None
                if self._native is None
                else NativeAttention(
                    self._native, self.config.num_heads, self.config.head_dim, prompts=True
                ),
            )
            call = plan.native_only()
            if self._fused is not None and call is not None and self._fused_takes(batch):
                hidden = self.model.embed(ids).contiguous()
                if self._fused(hidden, positions.int(), slots, call, rows):
                    return hidden if rows is None else hidden[: rows.shape[0]]
            attention = StoreThenAttend(slots, plan)
        return self.model(ids, positions, attention, self.kv_caches, rows)

    def _fused_takes(self, batch: StepBatch) -> bool:
        """Whether the fused step runs this step: one within its rows, and with prompt chunks
        only where it takes them (int4's wide layout; float32's prompts keep float32 GEMM)."""
        assert self._fused is not None
        if len(batch.input_ids) > self._fused.max_rows:
            return False
        return self._fused.takes_prompts or max(batch.query_lens) <= NATIVE_MAX_QUERY

    def _bitmask(self, constraints: list[object | None], vocab: int) -> torch.Tensor | None:
        import torch

        if not any(c is not None for c in constraints):
            return None
        mask = torch.full((len(constraints), (vocab + 31) // 32), -1, dtype=torch.int32)
        for row, constraint in enumerate(constraints):
            if constraint is not None:
                constraint.fill_bitmask(mask, row)  # type: ignore[attr-defined]
        return mask.to(self.device, non_blocking=True)

    def save_blocks(self, block_ids: list[int]) -> list[Any]:
        """Copies of these blocks' keys and values, every layer (for the disk cache)."""
        from backends.engine.model.kv_transfer import gather_blocks

        return self._on_compute(gather_blocks, self.kv_caches, block_ids)

    def load_blocks(self, block_ids: list[int], values: list[Any]) -> None:
        """Write blocks saved by :meth:`save_blocks` (in any process) into these pool blocks."""
        from backends.engine.model.kv_transfer import scatter_blocks

        self._on_compute(scatter_blocks, self.kv_caches, block_ids, values)

    def close(self) -> None:
        """Drop the weights, the KV cache and any captured graphs."""
        self._graphs = None
        self.kv_caches = []
        if self._compute is not None:
            self._compute.close()
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()


def _torch_dtype(name: str | None) -> torch.dtype | None:
    """The torch dtype an :class:`EngineConfig` names (float32, bfloat16 or float16), or None."""
    import torch

    if not name:
        return None
    if name not in ("float32", "bfloat16", "float16"):
        raise ValueError(f"dtype {name!r}: choose float32, bfloat16 or float16")
    dtype: torch.dtype = getattr(torch, name)
    return dtype


def default_kv_dtype(activations: torch.dtype, weights: str, half_kernel: bool) -> torch.dtype:
    """The KV cache's dtype by default: float16 for 4-bit and 8-bit weights on the CPU where the
    C attention kernel reads it (as llama.cpp keeps its cache), which halves the bytes that
    decode attention reads, its cost at long contexts; else the activations' dtype."""
    import torch

    if activations == torch.float32 and weights in ("int4", "int8") and half_kernel:
        return torch.float16
    return activations


class StoreThenAttend:
    """CPU step attention: store the new K/V in the cache, then run the planned attention."""

    def __init__(self, slots: torch.Tensor, plan: Callable[..., torch.Tensor]) -> None:
        self.slots = slots
        self.plan = plan

    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
    ) -> torch.Tensor:
        store_kv_reference(k, v, k_cache, v_cache, self.slots)
        return self.plan(q, k, v, k_cache, v_cache)


class KernelAttention:
    """GPU step attention through the Triton store and paged-attention kernels (no host syncs)."""

    def __init__(
        self,
        kernels: tuple[Any, Any],
        slots: Any,
        tables: Any,
        starts: Any,
        contexts: Any,
        scale: float,
    ):
        self.store, self.attend = kernels
        self.slots, self.tables, self.starts, self.contexts, self.scale = (
            slots,
            tables,
            starts,
            contexts,
            scale,
        )

    @classmethod
    def from_batch(
        cls, batch: StepBatch, kernels: tuple[Any, Any], scale: float, device: str
    ) -> KernelAttention:
        import torch

        width = max(len(t) for t in batch.block_tables)
        tables = torch.tensor(
            [t + [0] * (width - len(t)) for t in batch.block_tables], dtype=torch.int32
        )

        def put(values: Any, dtype: torch.dtype) -> torch.Tensor:
            return torch.as_tensor(values, dtype=dtype).to(device, non_blocking=True)

        return cls(
            kernels,
            put(batch.slot_mapping, torch.long),
            put(tables, torch.int32),
            put(_cumulative(batch.query_lens), torch.int32),
            put(batch.context_lens, torch.int32),
            scale,
        )

    def __call__(self, q: Any, k: Any, v: Any, k_cache: Any, v_cache: Any) -> Any:
        self.store(k, v, k_cache, v_cache, self.slots)
        return self.attend(q, k_cache, v_cache, self.tables, self.starts, self.contexts, self.scale)


def _cumulative(lengths: list[int]) -> list[int]:
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def _load_triton_kernels() -> tuple[Any, Any] | None:
    """The Triton store/attention kernels, or None (then the PyTorch path runs on the GPU too)."""
    try:
        from backends.engine.model.triton_attention import paged_attention
        from backends.engine.model.triton_store import store_kv
    except ImportError:
        return None
    return store_kv, paged_attention


class DecodeGraphs:
    """CUDA graphs of the forward pass for pure-decode steps, one per padded batch size."""

    def __init__(self, runner: ModelRunner, sizes: tuple[int, ...]) -> None:
        import torch

        self.runner = runner
        self.sizes = sizes
        largest = max(sizes)
        device = runner.device
        blocks_per_seq = -(-runner.config.max_position // runner.block_size)
        # Padding rows write to and read from the spare last block, so real blocks stay untouched.
        self.spare = runner.num_blocks
        self.ids = torch.zeros(largest, dtype=torch.long, device=device)
        self.positions = torch.zeros(largest, dtype=torch.long, device=device)
        self.slots = torch.full(
            (largest,), self.spare * runner.block_size, dtype=torch.long, device=device
        )
        self.tables = torch.full(
            (largest, blocks_per_seq), self.spare, dtype=torch.int32, device=device
        )
        self.starts = torch.arange(largest + 1, dtype=torch.int32, device=device)
        self.contexts = torch.ones(largest, dtype=torch.int32, device=device)
        self.graphs: dict[int, Any] = {}
        self.outputs: dict[int, torch.Tensor] = {}
        kernels = runner._kernels
        assert kernels is not None  # only built when the kernels imported
        pool = None
        with torch.inference_mode():
            for size in sorted(
                sizes, reverse=True
            ):  # largest first so smaller graphs reuse its pool
                attention = KernelAttention(
                    kernels,
                    self.slots[:size],
                    self.tables[:size],
                    self.starts[: size + 1],
                    self.contexts[:size],
                    runner.scale,
                )
                args = (self.ids[:size], self.positions[:size], attention, runner.kv_caches)
                runner.model(*args)  # warm-up: compile kernels, settle allocations
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool):
                    self.outputs[size] = runner.model(*args)
                pool = graph.pool()
                self.graphs[size] = graph

    def fits(self, batch: StepBatch) -> bool:
        """A pure-decode step small enough for a captured graph."""
        return len(batch.input_ids) == len(batch.query_lens) <= max(self.sizes)

    def run(self, batch: StepBatch) -> torch.Tensor:
        """Fill the static inputs, replay the smallest fitting graph, return hidden states."""
        import torch

        count = len(batch.input_ids)
        size = next(s for s in self.sizes if s >= count)
        # Only the used columns are refreshed: the kernel reads no further than each context length.
        width = max(len(t) for t in batch.block_tables)
        rows = [t + [0] * (width - len(t)) for t in batch.block_tables]
        device = self.runner.device
        self.ids[:count].copy_(torch.tensor(batch.input_ids), non_blocking=True)
        self.positions[:count].copy_(torch.tensor(batch.positions), non_blocking=True)
        self.slots[:count].copy_(torch.tensor(batch.slot_mapping), non_blocking=True)
        self.contexts[:count].copy_(
            torch.tensor(batch.context_lens, dtype=torch.int32), non_blocking=True
        )
        self.tables[:count, :width].copy_(
            torch.tensor(rows, dtype=torch.int32).to(device, non_blocking=True)
        )
        self.slots[count:size].fill_(self.spare * self.runner.block_size)
        self.contexts[count:size].fill_(1)
        self.tables[count:size].fill_(self.spare)
        self.graphs[size].replay()
        return self.outputs[size][:count]
