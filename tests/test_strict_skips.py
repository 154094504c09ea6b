"""``CLAWLOOP_STRICT_SKIPS=1`` (set by .ci/run): a skip for something missing fails the run.

An inner pytest runs with this folder's conftest.py on four tests: a missing module, a model
that is not installed, a missing CPU feature and a GPU-marked test. Strict, the first two fail
and the other two still skip; without the variable all four skip.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

PROBES = """
import pytest

def test_missing_module():
    pytest.importorskip("clawloop_no_such_module")

def test_model_not_installed():
    pytest.skip("the bundled model is not installed")

def test_hardware():
    pytest.skip("this CPU has no AVX512-BF16")

@pytest.mark.gpu
def test_gpu():
    pytest.skip("needs a CUDA GPU; could not import triton")
"""


def _run(tmp_path: Path, strict: bool) -> str:
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_probes.py").write_text(PROBES)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: needs a GPU\n")
    env = {"PATH": "/usr/bin:/bin", "CLAWLOOP_STRICT_SKIPS": "1" if strict else "0"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfs", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout


def test_strict_fails_what_is_missing_and_skips_what_this_machine_lacks(tmp_path: Path) -> None:
    out = _run(tmp_path, strict=True)
    assert "2 failed, 2 skipped" in out, out
    assert "FAILED test_probes.py::test_missing_module" in out, out
    assert "FAILED test_probes.py::test_model_not_installed" in out, out


def test_without_the_variable_every_probe_skips(tmp_path: Path) -> None:
    assert "4 skipped" in _run(tmp_path, strict=False)
