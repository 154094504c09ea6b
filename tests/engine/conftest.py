"""Engine test set-up: the Triton switch, and the transformers reference the parity tests share.

Without a GPU, Triton's kernels can only run in its interpreter, and Triton reads
``TRITON_INTERPRET`` when its language module is first imported. transformers (the reference in
the parity and loader tests) imports Triton too, so the switch is set here, before any test
module is collected, rather than per test.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

if not Path("/proc/driver/nvidia").exists():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(scope="session")
def reference() -> Any:
    """transformers' float32 model of the bundled GGUF (dequantized), loaded once per run."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from backends.default_model import default_model_path

    path = default_model_path()
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    )
    return model.eval()
