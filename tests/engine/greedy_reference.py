"""transformers' greedy continuations of several prompts, as one left-padded, masked batch."""

from __future__ import annotations

from typing import Any

import torch


def greedy_rows(
    reference: Any, prompts: list[list[int]], eos: list[int], new: int
) -> list[list[int]]:
    """Each prompt's ``new`` greedy tokens from the reference model (one batch keeps it quick)."""
    width = max(len(ids) for ids in prompts)
    padded = torch.tensor([[eos[0]] * (width - len(ids)) + ids for ids in prompts])
    mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts])
    with torch.inference_mode():
        out = reference.generate(
            padded,
            attention_mask=mask,
            max_new_tokens=new,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=eos[0],
        )
    rows: list[list[int]] = out[:, width:].tolist()
    return rows
