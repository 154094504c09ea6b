"""Shared fixtures for the sandbox tests: a workspace, loopback listeners, a runner factory.

Every network attempt aims at a listener the test itself starts on 127.0.0.1; nothing here
talks to any other address.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sbx_support import FAKE_SECRET, Listener, RunFn, running_listener

from sandbox.execute import CommandResult
from sandbox.runner import SandboxRunner
from sandbox.settings import ResourceLimits, SandboxSettings

# The programs these tests drive. A missing one fails loudly: a skipped escape test would
# look like a passing sandbox. Debian packages: bubblewrap curl netcat-openbsd acl git keyutils.
REQUIRED = ["bwrap", "curl", "nc", "setfacl", "git", "python3", "bash", "setsid", "keyctl"]


@pytest.fixture(scope="session", autouse=True)
def _tools_present() -> None:
    missing = [tool for tool in REQUIRED if shutil.which(tool) is None]
    if missing:
        pytest.fail(
            f"missing programs for the sandbox tests: {missing}; "
            "apt-get install bubblewrap curl netcat-openbsd acl git keyutils",
            pytrace=False,
        )


@pytest.fixture
def listener() -> Iterator[Listener]:
    with running_listener() as lis:
        yield lis


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A git repository with one file, next to an ``outside`` folder it must not reach."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim.txt").write_text("untouched\n")
    (ws / "hello.txt").write_text("hello from the workspace\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run([*git, "-C", str(ws), "add", "hello.txt"], check=True)
    subprocess.run([*git, "-C", str(ws), "commit", "-qm", "init"], check=True)
    return ws


@pytest.fixture
def run(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> RunFn:
    """Run a bash script in the sandbox over ``workspace``; settings may be overridden."""
    monkeypatch.setenv("CLAWLOOP_TEST_TOKEN", FAKE_SECRET)

    def go(script: str, timeout: float = 10, **overrides: Any) -> CommandResult:
        limits = {"processes": 64, "memory_mb": 1024, "file_size_mb": 8}
        limits.update(overrides.pop("limits", {}))
        hidden = overrides.pop("hidden", [])
        environ = overrides.pop("environ", dict(os.environ))
        where = overrides.pop("workspace", workspace)
        settings = SandboxSettings(limits=ResourceLimits(timeout_s=timeout, **limits), **overrides)
        runner = SandboxRunner(settings, where, environ, hidden)
        return runner.run(["bash", "-c", script])

    return go
