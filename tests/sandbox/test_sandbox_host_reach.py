"""Reaching the host from a sandboxed command through what it might inherit or share with it.

An attacker with a shell command in the user's workspace tries: a descriptor of a part of the
workspace the view leaves out (``/proc/self/fd/N/secret``), a descriptor clawloop's process
holds open, the user's terminal (``TIOCSTI`` typing into it, writing to ``/dev/tty``), and a
host process of the command's own uid (``ptrace``, signals). Each is judged on the host, and
each has a control that shows the judge sees the effect once the mechanism is taken away. The
attempts also run as an unprivileged user (``test_sandbox_as_user``).
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sbx_support import RunFn

import sandbox.runner
from sandbox.bwrap import MountPlan
from sandbox.execute import CommandResult
from sandbox.runner import Grant, SandboxRunner
from sandbox.settings import ResourceLimits, SandboxSettings

SECRET = "host-reach-secret-81c3"
SETTINGS = SandboxSettings(limits=ResourceLimits(timeout_s=10, processes=64, memory_mb=1024))

# --- descriptors of the parts a skill's view leaves out ---

THROUGH_FDS = (
    "for f in /proc/self/fd/*; do cat $f/secret.txt $f/.git/config $f/config; "
    "echo planted > $f/planted.txt; echo '[alias] x = !touch /tmp/p' >> $f/config; done "
    "2>/dev/null; true"
)


@pytest.fixture
def ws(workspace: Path) -> Path:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "guide.md").write_text("the guide\n")
    (workspace / "secret.txt").write_text(SECRET + "\n")
    (workspace / "out").mkdir()
    return workspace


def _skill(ws: Path) -> CommandResult:
    runner = SandboxRunner(
        SETTINGS,
        ws,
        dict(os.environ),
        grant=Grant(programs=["cat"], read_paths=["docs/**"], write_paths=["out/**"]),
    )
    return runner.run(["bash", "-c", THROUGH_FDS])


def _judge_fds(ws: Path, result: CommandResult) -> list[str]:
    broken = []
    if SECRET in result.stdout or "[core]" in result.stdout:
        broken.append("read past the view")
    if (ws / "planted.txt").exists():
        broken.append("wrote past the write paths")
    if "alias" in (ws / ".git" / "config").read_text():
        broken.append("rewrote .git/config")
    return broken


def test_no_descriptor_of_a_part_left_out_reaches_the_command(ws: Path) -> None:
    result = _skill(ws)
    assert _judge_fds(ws, result) == [], (result.stdout, result.stderr)


def test_control_with_every_descriptor_passed_the_view_is_bypassed(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = sandbox.runner.passed_fds

    def everything(args: list[str], plan: MountPlan) -> tuple[int, ...]:
        held = [plan.workspace_fd, *(fd for fd, _ in plan.protected)]
        return tuple(sorted({*held, *original(args, plan)}))

    monkeypatch.setattr(sandbox.runner, "passed_fds", everything)
    result = _skill(ws)
    assert "read past the view" in _judge_fds(ws, result), (result.stdout, result.stderr)
    assert "wrote past the write paths" in _judge_fds(ws, result)


# --- a descriptor clawloop's own process holds open ---

WRITE_FDS = "for n in $(seq 3 60); do echo pwned >&$n; done 2>/dev/null; true"


@pytest.fixture
def held_fd(workspace: Path) -> Iterator[tuple[int, Path]]:
    victim = workspace.parent / "outside" / "victim.txt"
    fd = os.open(victim, os.O_WRONLY | os.O_APPEND)
    os.set_inheritable(fd, True)
    try:
        yield fd, victim
    finally:
        os.close(fd)


def test_a_descriptor_the_agent_holds_is_not_inherited(
    run: RunFn, held_fd: tuple[int, Path]
) -> None:
    run(WRITE_FDS)
    assert held_fd[1].read_text() == "untouched\n"


def test_control_an_inherited_descriptor_writes_outside(held_fd: tuple[int, Path]) -> None:
    subprocess.run(["bash", "-c", WRITE_FDS], close_fds=False, check=False)
    assert "pwned" in held_fd[1].read_text()


# --- the user's terminal ---

# Writes to every terminal it can open, and types a line into each with TIOCSTI. The markers
# are split in the text so that only the attempt itself can put them on the screen.
TERMINAL = """for t in /dev/tty /dev/pts/* /dev/console; do echo TTY""WRITE > $t; done 2>/dev/null
python3 - <<'EOF'
import fcntl, glob, os, termios
line = b'echo INJ' + b'ECTED\\n'
fds = [0, 1, 2]
for path in ['/dev/tty', *glob.glob('/dev/pts/*')]:
    try:
        fds.append(os.open(path, os.O_RDWR | os.O_NOCTTY))
    except OSError:
        pass
for fd in fds:
    try:
        for c in line:
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))
    except OSError:
        pass
EOF
true"""
IN_TERMINAL = """
import os, subprocess, sys
from pathlib import Path
script, ws, how = sys.argv[1:4]
if how == "sandbox":
    from sandbox.runner import SandboxRunner
    from sandbox.settings import ResourceLimits, SandboxSettings
    limits = ResourceLimits(timeout_s=10, processes=64, memory_mb=1024)
    SandboxRunner(SandboxSettings(limits=limits), Path(ws), dict(os.environ)).run(
        ["bash", "-c", script]
    )
else:
    subprocess.run(["bash", "-c", script], timeout=10, check=False)
"""


def _on_the_screen(workspace: Path, how: str) -> bytes:
    """What a terminal shows while clawloop (or a plain shell, ``how="plain"``) runs
    :data:`TERMINAL` in a session whose controlling terminal it is."""
    pid, master = pty.fork()
    if pid == 0:  # the child: the session leader of a new terminal
        try:
            argv = [sys.executable, "-c", IN_TERMINAL, TERMINAL, str(workspace), how]
            os.execv(sys.executable, argv)
        finally:
            os._exit(127)
    shown = bytearray()
    deadline = time.monotonic() + 40
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                continue
            try:
                data = os.read(master, 4096)
            except OSError:  # the terminal closed: the child is done
                break
            if not data:
                break
            shown += data
    finally:
        if time.monotonic() >= deadline:
            os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(master)
    return bytes(shown)


def test_the_terminal_is_out_of_reach(workspace: Path) -> None:
    shown = _on_the_screen(workspace, "sandbox")
    assert b"TTYWRITE" not in shown and b"INJECTED" not in shown, shown[-2000:]


def test_control_a_plain_shell_writes_and_types_into_the_terminal(workspace: Path) -> None:
    shown = _on_the_screen(workspace, "plain")
    assert b"TTYWRITE" in shown and b"INJECTED" in shown, shown[-2000:]


# --- a host process of the command's own uid: ptrace and signals ---

PTRACE = (
    'python3 -c "import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True)\n'
    "for request in (0x4206, 16):\n"
    "    print('ptrace', request, libc.ptrace(request, int(sys.argv[1]), 0, 0))\" $VICTIM; "
    "kill -STOP $VICTIM; kill -KILL $VICTIM; true"
)


def _victim_uid(workspace: Path) -> int:
    """The uid a sandboxed command runs as here: the same uid is what ptrace and kill need."""
    if os.geteuid() != 0:
        return os.geteuid()
    owner = workspace.stat().st_uid
    return owner if owner != 0 else SandboxSettings().sandbox_uid


@pytest.fixture
def victim(workspace: Path) -> Iterator[int]:
    uid = _victim_uid(workspace)
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    argv = [*drop, "sleep", "60"] if os.geteuid() == 0 else ["sleep", "60"]
    proc = subprocess.Popen(argv)
    time.sleep(0.2)
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _disturbed(pid: int) -> list[str]:
    """How the host process ``pid`` was touched: traced, stopped or killed."""
    try:
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        )
    except FileNotFoundError:
        return ["killed"]
    found = []
    if status["TracerPid"].strip() != "0":
        found.append("traced")
    state = status["State"].split()[0]
    if state in ("T", "t", "Z", "X"):
        found.append(f"state {state}")
    return found


def test_a_host_process_of_the_same_uid_cannot_be_traced_or_signalled(
    run: RunFn, victim: int
) -> None:
    result = run(f"VICTIM={victim}; {PTRACE}")
    time.sleep(0.2)
    assert _disturbed(victim) == [], (result.stdout, result.stderr)


def test_control_unsandboxed_the_host_process_is_reached(run: RunFn, victim: int) -> None:
    run(f"VICTIM={victim}; {PTRACE}", backend="off")
    time.sleep(0.2)
    assert _disturbed(victim) != []
