"""``CLAWLOOP_STRICT_SKIPS=1`` (set by .ci/run): a skip for something missing fails the run.

An inner pytest runs with this folder's conftest.py on four tests: a missing module, a model
that is not installed, a missing CPU feature and a GPU-marked test. Strict, the first two fail
and the other two still skip; without the variable all four skip.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def _conftest() -> Any:
    spec = importlib.util.spec_from_file_location(
        "strict_conftest", Path(__file__).with_name("conftest.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_this_install_has_the_whole_test_extra() -> None:
    assert _conftest().missing_requirements() == []


def test_a_requirement_that_is_not_installed_is_named(tmp_path: Path) -> None:
    """A stand-in distribution (its metadata written here) whose [test] extra pulls in its own
    [llamacpp] extra, which needs a package that is not installed and one that is too old."""
    info = tmp_path / "standin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: standin\nVersion: 1.0\n"
        'Requires-Dist: standin[llamacpp]; extra == "test"\n'
        'Requires-Dist: pytest>=1; extra == "test"\n'
        'Requires-Dist: clawloop-not-installed-package>=0.3; extra == "llamacpp"\n'
        'Requires-Dist: pytest>=999; extra == "llamacpp"\n'
        'Requires-Dist: clawloop-other-missing; extra == "unused"\n'
    )
    sys.path.insert(0, str(tmp_path))
    try:
        missing = _conftest().missing_requirements("standin", "test")
    finally:
        sys.path.remove(str(tmp_path))
    assert missing[0] == "clawloop-not-installed-package (the [llamacpp] extra)", missing
    assert missing[1].startswith("pytest ") and missing[1].endswith("not >=999"), missing
    assert len(missing) == 2, missing


def test_strict_run_stops_at_once_naming_the_missing_package(tmp_path: Path) -> None:
    """The real hook, in an inner pytest whose clawloop metadata lacks a package of [test]."""
    info = tmp_path / "site" / "clawloop-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: clawloop\nVersion: 0.0\n"
        'Requires-Dist: llama-cpp-python-missing-here>=0.3; extra == "test"\n'
    )
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    env = {"PATH": "/usr/bin:/bin", "CLAWLOOP_STRICT_SKIPS": "1", "PYTHONPATH": str(info.parent)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "missing llama-cpp-python-missing-here (the [test] extra)" in done.stdout + done.stderr
    assert "1 passed" not in done.stdout
