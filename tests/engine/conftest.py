"""Engine test set-up that must happen before anything imports Triton.

Without a GPU, Triton's kernels can only run in its interpreter, and Triton reads
``TRITON_INTERPRET`` when its language module is first imported. transformers (the reference in
the parity and loader tests) imports Triton too, so the switch is set here, before any test
module is collected, rather than per test.
"""

from __future__ import annotations

import os
from pathlib import Path

if not Path("/proc/driver/nvidia").exists():
    os.environ.setdefault("TRITON_INTERPRET", "1")
