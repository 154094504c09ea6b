"""bench/gpu_check.sh without a GPU (says so, exits 0, writes its JSON) and its JSON merger
over a real pytest JUnit report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.gpu_check_json import merge

ROOT = Path(__file__).resolve().parent.parent


def test_without_a_gpu_it_says_so_and_exits_0(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    # An nvidia-smi that finds no GPU, first on PATH: the check must stop there, whatever
    # machine the test runs on.
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho 'No devices were found'\nexit 6\n")
    (fake / "nvidia-smi").chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "OUT": str(out)}
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_check.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no GPU: nothing to check" in done.stdout
    report = json.loads((out / "gpu_check.json").read_text())
    assert report == {"gpu": None, "steps": {}, "failed_steps": [], "passed": False}


def test_merge_counts_a_real_junit_report_and_keeps_each_steps_figures(tmp_path: Path) -> None:
    probes = tmp_path / "probes"
    probes.mkdir()
    (probes / "test_probes.py").write_text(
        "import pytest\n\n"
        "def test_a():\n    pass\n\n"
        "def test_b():\n    pass\n\n"
        "def test_c():\n    assert False\n\n"
        "def test_d():\n    pytest.skip('no device')\n"
    )
    results = tmp_path / "results"
    results.mkdir()
    junit = f"--junitxml={results / 'pytest-gpu.xml'}"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(probes), junit],
        cwd=probes,
        capture_output=True,
        timeout=60,
    )
    (results / "gpu.txt").write_text("GPU 0: NVIDIA H200 (UUID: GPU-x)\n")
    (results / "parity.json").write_text(json.dumps({"float32": {"max_abs_logit_diff": 1e-4}}))
    (results / "steps.tsv").write_text(
        "pytest-gpu\t1\t42\nparity\t0\t30\nspeculation\t-1\t0\tbench/speculation.py not present\n"
    )
    report = merge(results)
    assert report["gpu"] == "GPU 0: NVIDIA H200 (UUID: GPU-x)"
    pytest_step = report["steps"]["pytest-gpu"]
    assert pytest_step["exit"] == 1 and pytest_step["seconds"] == 42
    assert pytest_step["figures"] == {
        "tests": 4,
        "failures": 1,
        "errors": 0,
        "skipped": 1,
        "passed": 2,
    }
    assert report["steps"]["parity"]["figures"] == {"float32": {"max_abs_logit_diff": 1e-4}}
    speculation = report["steps"]["speculation"]
    assert speculation == {
        "exit": -1,
        "seconds": 0,
        "note": "bench/speculation.py not present",
        "figures": None,
    }
    assert report["failed_steps"] == ["pytest-gpu"]
    assert report["passed"] is False
