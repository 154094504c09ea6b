"""LoRA training on the CPU: epochs over encoded examples, a checkpoint after each, resumable.

The base model is a GGUF file loaded by transformers (dequantized to float32); the adapter is
written as a GGUF LoRA file next to a manifest of the data, the base model's hash and the
settings. A run killed part-way restarts from its last epoch's checkpoint when it is started
again with the same data and settings; started again with more epochs, a finished run goes
on from where it ended.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import UserError
from backends.gguf.lora import read_adapter, write_adapter
from backends.local.chat_template import ChatTemplate
from backends.training.cpu import native_bf16
from backends.training.examples import Encoded, encode
from backends.training.lora import DEFAULT_TARGETS, from_gguf_adapter, to_gguf_adapter

TRAIN_HINT = "pip install 'clawloop[train]'"
ADAPTER_FILE = "adapter.gguf"
MANIFEST_FILE = "manifest.json"
CHECKPOINT_FILE = "checkpoint.pt"


@dataclass(slots=True)
class TrainSettings:
    """What a run trains with; all of it goes into the manifest and the resume fingerprint."""

    epochs: int = 2
    rank: int = 8
    alpha: float = 16.0
    learning_rate: float = 2e-4
    accumulate: int = 4
    max_tokens: int = 2048
    seed: int = 0
    targets: tuple[str, ...] = DEFAULT_TARGETS
    bf16: bool | None = None  # None: autocast where the CPU runs bfloat16 natively
    start_from: str | None = None  # an earlier run's adapter.gguf to start the LoRA from


@dataclass(slots=True)
class StepReport:
    """Sent after every example: where the run is and its running loss."""

    epoch: int
    step: int
    steps: int
    loss: float


@dataclass(slots=True)
class TrainResult:
    """What a finished run wrote and how it went."""

    adapter: Path
    manifest: Path
    epoch_losses: list[float] = field(default_factory=list)
    resumed_from: int = 0
    bf16: bool = False
    seconds: float = 0.0


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _import_training() -> tuple[Any, Any, Any]:
    try:
        import peft
        import torch
        import transformers
    except ImportError as exc:
        raise UserError(f"training needs {exc.name}: {TRAIN_HINT}") from None
    return torch, transformers, peft


def train(
    base: Path,
    examples: list[dict[str, Any]],
    out: Path,
    settings: TrainSettings,
    data: dict[str, Any],
    on_step: Callable[[StepReport], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    save_every: int = 0,
) -> TrainResult:
    """Train a LoRA adapter on ``examples`` into ``out``; resume if it holds a checkpoint.

    ``data`` describes where the examples came from, for the manifest. ``save_every`` (in
    examples) also checkpoints inside an epoch, at an optimizer step, so a long epoch that is
    stopped loses at most that many examples.
    """
    torch, transformers, peft = _import_training()
    note = on_note or (lambda _text: None)
    began = time.monotonic()
    base = Path(base)
    from backends.engine.tokenizer import load_tokenizer

    template = ChatTemplate.from_gguf(base)
    tokenizer = load_tokenizer(base)
    encoded = [
        e
        for e in (encode(x, template, tokenizer.encode, settings.max_tokens) for x in examples)
        if e
    ]
    if not encoded:
        raise UserError("no example has assistant tokens to train on within max_tokens")
    bf16 = native_bf16() if settings.bf16 is None else settings.bf16
    note(
        "bfloat16 autocast: on (the CPU runs bfloat16 natively)"
        if bf16
        else "bfloat16 autocast: off (no AVX-512 BF16 or AMX on this CPU); training in float32"
    )
    base_hash = file_sha256(base)
    fingerprint = _fingerprint(settings, base_hash, encoded)
    torch.manual_seed(settings.seed)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(base.parent), gguf_file=base.name, dtype=torch.float32
    )
    config = peft.LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        target_modules=list(settings.targets),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
    )
    model = peft.get_peft_model(model, config)
    if settings.start_from:
        _start_from(torch, peft, model, Path(settings.start_from), settings)
        note(f"starting from the adapter {settings.start_from}")
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=settings.learning_rate)
    out.mkdir(parents=True, exist_ok=True)
    checkpoint = out / CHECKPOINT_FILE
    start_epoch, start_step, start_total, epoch_losses = 0, 0, 0.0, []
    if checkpoint.is_file():
        saved = torch.load(checkpoint, weights_only=False)
        if saved["fingerprint"] != fingerprint:
            raise UserError(
                f"{out} holds a checkpoint of a run with other data or settings: "
                "pass another --out, or delete its checkpoint.pt"
            )
        peft.set_peft_model_state_dict(model, saved["lora"])
        optimizer.load_state_dict(saved["optimizer"])
        start_epoch, epoch_losses = saved["epoch"], list(saved["epoch_losses"])
        start_step, start_total = saved.get("step", 0), saved.get("total", 0.0)
        if start_epoch > settings.epochs:
            raise UserError(
                f"{out} holds a run already {start_epoch} epochs long: pass --epochs "
                f"{start_epoch} or more to go on with it, or another --out"
            )
        note(f"resuming after epoch {start_epoch} of {settings.epochs}, step {start_step}")

    def save(epoch_done: int, step: int, total: float) -> None:
        state = {
            "fingerprint": fingerprint,
            "epoch": epoch_done,
            "step": step,  # examples done in the epoch after ``epoch``
            "total": total,
            "epoch_losses": epoch_losses,
            "lora": peft.get_peft_model_state_dict(model),
            "optimizer": optimizer.state_dict(),
        }
        partial = checkpoint.with_suffix(".tmp")
        torch.save(state, partial)
        partial.replace(checkpoint)  # a kill mid-write keeps the previous checkpoint

    model.train()
    steps = len(encoded)
    for epoch in range(start_epoch, settings.epochs):
        order = list(range(steps))
        random.Random(settings.seed + epoch).shuffle(order)
        skip, total = (start_step, start_total) if epoch == start_epoch else (0, 0.0)
        for step, index in enumerate(order, 1):
            if step <= skip:
                continue  # done before the run was stopped
            loss = _loss(torch, model, encoded[index], bf16)
            (loss / settings.accumulate).backward()
            total += loss.item()
            if step % settings.accumulate == 0 or step == steps:
                optimizer.step()
                optimizer.zero_grad()
                if save_every and step % save_every < settings.accumulate and step < steps:
                    save(epoch, step, total)
            if on_step is not None:
                on_step(StepReport(epoch + 1, step, steps, total / step))
        epoch_losses.append(total / steps)
        save(epoch + 1, 0, 0.0)
    adapter = to_gguf_adapter(peft.get_peft_model_state_dict(model), settings.alpha, model.config)
    adapter_file = out / ADAPTER_FILE
    write_adapter(adapter_file, adapter, {"general.name": "clawloop LoRA"})
    result = TrainResult(
        adapter_file,
        out / MANIFEST_FILE,
        epoch_losses,
        start_epoch,
        bf16,
        time.monotonic() - began,
    )
    manifest = {
        "adapter": ADAPTER_FILE,
        "base_model": {"path": str(base), "sha256": base_hash},
        "data": {**data, "examples": len(examples), "trained_examples": len(encoded)},
        "settings": {**asdict(settings), "targets": list(settings.targets), "bf16": bf16},
        "epoch_losses": epoch_losses,
        "resumed_from_epoch": start_epoch,
        "seconds": round(result.seconds, 1),
    }
    result.manifest.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return result


def _loss(torch: Any, model: Any, example: Encoded, bf16: bool) -> Any:
    ids = torch.tensor([example.ids])
    labels = torch.tensor([example.labels])
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    with autocast:
        return model(input_ids=ids, labels=labels).loss


def _start_from(torch: Any, peft: Any, model: Any, path: Path, settings: TrainSettings) -> None:
    """Load an earlier adapter's weights into the fresh LoRA; its rank and alpha must match."""
    adapter = read_adapter(path)
    if adapter.rank != settings.rank or adapter.alpha != settings.alpha:
        raise UserError(
            f"{path} has rank {adapter.rank} and alpha {adapter.alpha:g}: "
            f"train with --rank {adapter.rank} --alpha {adapter.alpha:g} to start from it"
        )
    keys = list(peft.get_peft_model_state_dict(model))
    state = from_gguf_adapter(adapter, keys, model.config)
    if not state:
        raise UserError(f"{path} adapts none of the modules this run trains")
    peft.set_peft_model_state_dict(model, {k: torch.from_numpy(v.copy()) for k, v in state.items()})


def _fingerprint(settings: TrainSettings, base_hash: str, encoded: list[Encoded]) -> str:
    """What identifies a run: everything but its length, so a finished run can be extended."""
    digest = hashlib.sha256(base_hash.encode())
    described = {**asdict(settings), "targets": list(settings.targets)}
    del described["epochs"]
    digest.update(json.dumps(described).encode())
    for e in encoded:
        digest.update(json.dumps([e.ids, e.labels]).encode())
    return digest.hexdigest()
