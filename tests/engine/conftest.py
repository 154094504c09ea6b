"""Engine test set-up: what the engine's tests need, the Triton switch, and the transformers
reference the parity tests share.

The engine's tests import torch, numpy, gguf, transformers, xgrammar and jsonschema at the top,
as any module does; this folder is skipped as a whole, with the install command, when one of
them is missing (and fails under ``CLAWLOOP_STRICT_SKIPS=1``, as in CI).

Without a GPU, Triton's kernels can only run in its interpreter, and Triton reads
``TRITON_INTERPRET`` when its language module is first imported. transformers (the reference in
the parity and loader tests) imports Triton too, so the switch is set here, before any test
module is collected, rather than per test.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

NEEDED = ("torch", "numpy", "gguf", "transformers", "xgrammar", "jsonschema")
_missing = [m for m in NEEDED if importlib.util.find_spec(m) is None]
if _missing:
    _why = f"the engine's tests need {', '.join(_missing)}: pip install -e '.[test]'"
    if os.environ.get("CLAWLOOP_STRICT_SKIPS") == "1":
        raise ImportError(_why)
    pytest.skip(_why, allow_module_level=True)

if not Path("/proc/driver/nvidia").exists():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(scope="session")
def reference() -> Any:
    """transformers' float32 model of the bundled GGUF (dequantized), loaded once per run."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from backends.gguf.default_model import default_model_path

    path = default_model_path()
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    )
    return model.eval()
