"""A cancelled run kills its running command at once: the run's cancel token is the hook.

The judge is the host's process table: every process of the command (bwrap, the shell, what it
forked and ``setsid``-ed) must be gone within a second of the cancel, not at the timeout.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest
from sbx_support import processes_with

from agent.errors import ToolError
from agent.run_context import RunContext, context_for_call
from sandbox.runner import SandboxRunner
from sandbox.settings import ResourceLimits, SandboxSettings


def wait_until(check: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("backend", ["bwrap", "off"])
def test_cancel_kills_the_whole_command_within_a_second(workspace: Path, backend: str) -> None:
    marker = f"{60 + random.randint(1000, 9999) / 10000:.4f}"
    settings = SandboxSettings(backend=backend, limits=ResourceLimits(timeout_s=60))
    runner = SandboxRunner(settings, workspace, dict(os.environ))
    run = RunContext()
    # A forked, setsid-ed grandchild too: it leaves the command's process group.
    script = f"setsid sleep {marker} & sleep {marker}; echo never"
    got: list[object] = []
    thread = threading.Thread(
        target=lambda: got.append(context_for_call(run).run(runner.run, ["bash", "-c", script]))
    )
    thread.start()
    assert wait_until(lambda: len(processes_with(f"sleep {marker}")) >= 3, 10), "never started"
    stopped_at = time.monotonic()
    run.stop()
    thread.join(5)
    assert not thread.is_alive()
    if backend == "bwrap":
        # The pid namespace dies with bwrap: even the setsid-ed sleep is gone.
        assert wait_until(lambda: not processes_with(marker), 1.0), processes_with(marker)
    else:
        # Without the sandbox only the process group is killed; the setsid-ed one escapes it.
        assert wait_until(lambda: len(processes_with(marker)) <= 1, 1.0)
        for pid in processes_with(marker):
            os.kill(pid, 9)
    [result] = got
    assert time.monotonic() - stopped_at < 2.0
    assert result.cancelled and result.exit_code is None  # type: ignore[attr-defined]
    assert "never" not in result.stdout  # type: ignore[attr-defined]
    assert any("stopped the task" in n for n in result.notes)  # type: ignore[attr-defined]


def test_a_cancelled_run_starts_no_command_and_other_runs_are_untouched(workspace: Path) -> None:
    runner = SandboxRunner(SandboxSettings(), workspace, dict(os.environ))
    stopped, other = RunContext(), RunContext()
    stopped.stop()
    with pytest.raises(ToolError, match="stopped the task"):
        context_for_call(stopped).run(runner.run, ["bash", "-c", "touch made"])
    assert not (workspace / "made").exists()
    result = context_for_call(other).run(runner.run, ["bash", "-c", "echo fine"])
    assert result.exit_code == 0 and "fine" in result.stdout and not result.cancelled
    outside = runner.run(["bash", "-c", "echo outside"])  # no run at all: no hook, runs
    assert outside.exit_code == 0 and not outside.cancelled
