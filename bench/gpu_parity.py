"""The engine on a GPU against transformers on the same GPU, over the same bundled GGUF.

For each engine dtype (``--dtypes``, default float32 and bfloat16): the last-position logits
of each chat prompt (largest absolute difference from transformers float32's) and greedy
continuations of ``--new-tokens`` tokens, the engine batching every prompt at once, against
transformers' own greedy continuation of each prompt alone (identical continuations, and the
share of tokens identical before the first difference). Run by hand (``bench/gpu_check.sh``
runs it):

    PYTHONPATH=. python bench/gpu_parity.py --json parity.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.parity_prompts import PROMPTS


def _chat(tokenizer: Any, text: str) -> list[int]:
    ids: list[int] = tokenizer.encode(
        f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
    )
    return ids


def _reference(path: Path, device: str, prompts: list[list[int]], new: int) -> tuple[Any, Any]:
    """transformers float32: each prompt's last logits and greedy continuation, alone."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    ).to(device)
    logits, rows = [], []
    with torch.inference_mode():
        for ids in prompts:
            batch = torch.tensor([ids], device=device)
            logits.append(model(batch).logits[0, -1].float().cpu())
            out = model.generate(batch, max_new_tokens=new, min_new_tokens=new, do_sample=False)
            rows.append(out[0, len(ids) :].tolist())
    del model
    torch.cuda.empty_cache()
    return torch.stack(logits), rows


def _engine(path: Path, device: str, dtype: str, prompts: list[list[int]], new: int) -> Any:
    import torch

    from backends.engine.core.engine_config import EngineConfig
    from backends.engine.core.llm_engine import LLMEngine
    from backends.engine.core.params import SamplingParams
    from backends.engine.model.model_runner import ModelRunner

    runner = ModelRunner(
        EngineConfig(path, device=device, dtype=dtype, kv_cache_bytes=1 << 30, weights=dtype)
    )
    seen: list[torch.Tensor] = []
    logits = runner.model.logits

    def recorded(hidden: torch.Tensor) -> torch.Tensor:
        out = logits(hidden)
        seen.append(out.float().cpu())
        return out

    runner.model.logits = recorded
    last = []
    for ids in prompts:  # alone, each prompt's one step: its last position's logits
        LLMEngine(runner).generate([ids], SamplingParams(0.0, max_tokens=1))
        last.append(seen[-1][-1])
    runner.model.logits = logits
    params = SamplingParams(temperature=0.0, max_tokens=new, ignore_eos=True)
    results = LLMEngine(runner).generate(prompts, params)
    runner.close()
    return torch.stack(last), [r.token_ids for r in results]


def _same_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from backends.engine.tokenizer import load_tokenizer
    from backends.gguf.default_model import default_model_path

    path = default_model_path()
    prompts = [_chat(load_tokenizer(path), text) for text in PROMPTS]
    ref_logits, ref_rows = _reference(path, args.device, prompts, args.new_tokens)
    report: dict[str, Any] = {"prompts": len(prompts), "new_tokens": args.new_tokens}
    for dtype in args.dtypes.split(","):
        logits, rows = _engine(path, args.device, dtype, prompts, args.new_tokens)
        prefixes = [_same_prefix(a, b) for a, b in zip(rows, ref_rows, strict=True)]
        figures = {
            "max_abs_logit_diff": float((logits - ref_logits).abs().max()),
            "same_argmax": int((logits.argmax(-1) == ref_logits.argmax(-1)).sum()),
            "identical_continuations": sum(p == args.new_tokens for p in prefixes),
            "tokens_before_first_difference": sum(prefixes) / (len(prompts) * args.new_tokens),
        }
        report[dtype] = figures
        print(f"engine {dtype} on {args.device} vs transformers float32: {figures}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
