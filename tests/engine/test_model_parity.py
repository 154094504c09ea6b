"""The engine's float32 model against transformers running the same bundled GGUF (dequantized).

(tests/engine/test_weight_parity.py holds the same checks for every weight choice.)

Tolerances: logits of whole prompts agree within 2e-3 absolute (logits here span about +-40; the
float32 differences seen are about 5e-5, from summation order). Greedy continuations of 64 tokens
for 8 prompts, the engine batching all 8 at once: at least 7 of 8 identical to transformers.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from greedy_reference import greedy_rows

from backends.engine.core.engine_config import EngineConfig
from backends.engine.model.model_runner import ModelRunner
from backends.gguf.default_model import default_model_path
from bench.parity_prompts import PROMPTS

try:  # the runner tests' scheduler stand-in, whether or not tests/ is a package
    from test_model_runner import Driver, prompt, recorded_logits
except ImportError:
    from tests.engine.test_model_runner import Driver, prompt, recorded_logits

pytestmark = pytest.mark.slow

NEW_TOKENS = 64


@pytest.fixture(scope="module")
def runner() -> ModelRunner:
    return ModelRunner(
        EngineConfig(default_model_path(), kv_cache_bytes=128 << 20, weights="float32")
    )


def test_prompt_logits_match(reference: Any, runner: ModelRunner) -> None:
    driver = Driver(runner)
    prompts = [prompt(runner, text) for text in PROMPTS[:4]]
    for i, ids in enumerate(prompts):
        driver.add(i, ids)
    with recorded_logits(runner) as seen, torch.inference_mode():
        driver.step({i: len(ids) for i, ids in enumerate(prompts)})  # all four in one step
        theirs = torch.stack([reference(torch.tensor([ids])).logits[0, -1] for ids in prompts])
    torch.testing.assert_close(seen[0], theirs, atol=2e-3, rtol=0)


def test_greedy_continuations_match(reference: Any, runner: ModelRunner) -> None:
    eos = runner.tokenizer.eos_token_ids
    driver = Driver(runner)
    prompts = [prompt(runner, text) for text in PROMPTS]
    for i, ids in enumerate(prompts):
        driver.add(i, ids)
    driver.generate(list(range(len(prompts))), NEW_TOKENS - 1)
    rows = greedy_rows(reference, prompts, eos, NEW_TOKENS)
    same = 0
    for i, ids in enumerate(prompts):
        ours, theirs = driver.seqs[i].tokens[len(ids) :], rows[i]
        stop = next((n + 1 for n, t in enumerate(theirs) if t in eos), len(theirs))
        same += ours[:stop] == theirs[:stop]
    print(f"greedy continuations identical: {same} of {len(prompts)}")
    assert same >= len(prompts) - 1, f"only {same} of {len(prompts)} continuations identical"
