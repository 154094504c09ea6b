"""Hard bounds on the sandbox's scratch space, and code run from memory in a program view.

- ``/tmp`` and ``/dev/shm`` are tmpfs with a size, and (through the exec guard) an inode
  count: 60,000 empty files take no space, so only ``nr_inodes`` stops them.
- In a skill's program view every mount but the declared programs' is ``noexec``; a memfd is on
  none of them, so a declared ``python3`` could copy a program it may not run into one and run
  it. The seccomp filter of a program view refuses ``memfd_create``.

Each attempt has a control that runs the same line with the mechanism taken away and shows the
judge sees what the attempt would have done. The attempts also run as an unprivileged user
(``test_sandbox_as_user``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sbx_support import RunFn

import sandbox.runner
from sandbox import seccomp
from sandbox.execute import CommandResult
from sandbox.runner import Grant, SandboxRunner
from sandbox.settings import ResourceLimits, SandboxSettings

FILES = 60_000
# Creates up to FILES empty files in the folder given as $1, then prints how many it made and
# the first error; the count comes from listing the folder afterwards.
FILL = (
    "python3 -c \"import sys\nerr = 'none'\nfor i in range({n}):\n"
    "    try: open(sys.argv[1] + '/f%d' % i, 'w').close()\n"
    '    except OSError as e: err = e.strerror; break\nprint(err)" {folder}; '
    "ls -f {folder} | grep -c '^f'"
)


def _fill(run: RunFn, folder: str, **overrides: object) -> tuple[str, int]:
    result = run(FILL.format(n=FILES, folder=folder), timeout=60, **overrides)
    lines = result.stdout.splitlines()
    assert len(lines) == 2, (result.stdout, result.stderr)
    return lines[0], int(lines[1])


@pytest.mark.parametrize("folder", ["/tmp", "/dev/shm"])
def test_sixty_thousand_files_in_scratch_stop_at_the_inode_limit(run: RunFn, folder: str) -> None:
    error, made = _fill(run, folder)
    limit = ResourceLimits().tmp_inodes
    assert error == "No space left on device", error
    assert limit - 10 <= made < limit, made


def test_the_inode_limit_is_the_setting(run: RunFn) -> None:
    error, made = _fill(run, "/tmp", limits={"tmp_inodes": 1000})
    assert error == "No space left on device" and 990 <= made < 1000, (error, made)


def test_control_without_the_guard_sixty_thousand_files_fit(
    run: RunFn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox.runner, "compiled_guard", lambda: None)
    error, made = _fill(run, "/tmp")
    assert error == "none" and made == FILES, (error, made)


# --- a program view: a declared python3 runs a copy of touch from memory ---

SETTINGS = SandboxSettings(limits=ResourceLimits(timeout_s=10, processes=64, memory_mb=1024))
LOADER = "/lib64/ld-linux-x86-64.so.2"
_COPY = (
    "import os\n"
    "fd = os.memfd_create('tool', 0)\n"
    "os.write(fd, open('docs/tool', 'rb').read())\n"
    "path = '/proc/self/fd/%d' % fd\n"
)
FROM_MEMORY = {
    "execve-proc-fd": _COPY + "os.execv(path, ['tool', 'out/marker'])",
    "fexecve": _COPY + "os.execve(fd, ['tool', 'out/marker'], {})",
    "loader-on-proc-fd": _COPY + f"os.execv({LOADER!r}, ['ld', path, 'out/marker'])",
}


@pytest.fixture
def ws(workspace: Path) -> Path:
    """A workspace holding a copy of ``touch`` the skill may read, and a folder it may write."""
    (workspace / "docs").mkdir()
    (workspace / "docs" / "tool").write_bytes(Path("/usr/bin/touch").read_bytes())
    (workspace / "out").mkdir()
    return workspace


def _python(ws: Path, source: str) -> CommandResult:
    runner = SandboxRunner(
        SETTINGS,
        ws,
        dict(os.environ),
        grant=Grant(programs=["python3"], read_paths=["docs/**"], write_paths=["out/**"]),
    )
    return runner.run(["python3", "-c", source])


@pytest.mark.parametrize("name", list(FROM_MEMORY))
def test_a_declared_interpreter_cannot_run_a_program_from_memory(ws: Path, name: str) -> None:
    result = _python(ws, FROM_MEMORY[name])
    assert not (ws / "out" / "marker").exists(), (result.stdout, result.stderr)
    assert "Operation not permitted" in result.stderr, result.stderr


def test_the_declared_interpreter_still_runs(ws: Path) -> None:
    result = _python(ws, "open('out/made', 'w').write(str(len(open('docs/tool', 'rb').read())))")
    assert result.exit_code == 0, result.stderr
    assert (ws / "out" / "made").read_text() == str(Path("/usr/bin/touch").stat().st_size)


@pytest.mark.parametrize("name", list(FROM_MEMORY))
def test_control_with_memfd_allowed_the_copy_runs(
    ws: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox.runner, "filter_fd", lambda program_view: seccomp.filter_fd())
    result = _python(ws, FROM_MEMORY[name])
    assert (ws / "out" / "marker").exists(), (result.stdout, result.stderr)
