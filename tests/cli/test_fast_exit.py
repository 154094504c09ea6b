"""After torch was imported, the CLI exits without module teardown but loses nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import atexit, sys, threading, time
from pathlib import Path
{heavy}
from cli.fast_exit import finish

out = Path(sys.argv[1])
def late() -> None:
    time.sleep(0.3)
    (out / "thread").write_text("done")
threading.Thread(target=late).start()
atexit.register(lambda: (out / "atexit").write_text("ran"))
sys.stdout.write("answer without a newline")
finish({code})
"""


def run(tmp_path: Path, heavy: str, code: str) -> subprocess.CompletedProcess[str]:
    script = SCRIPT.format(heavy=heavy, code=code)
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("heavy", ["import torch", ""], ids=["after-torch", "plain"])
def test_threads_atexit_and_output_all_finish_with_the_exit_code(
    tmp_path: Path, heavy: str
) -> None:
    if heavy:
        pytest.importorskip("torch")
    done = run(tmp_path, heavy, "3")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "answer without a newline"
    assert (tmp_path / "thread").read_text() == "done"
    assert (tmp_path / "atexit").read_text() == "ran"


def test_a_message_as_exit_code_is_printed_and_gives_status_1(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    done = run(tmp_path, "import torch", "'stopped: bad input'")
    assert done.returncode == 1
    assert "stopped: bad input" in done.stderr
