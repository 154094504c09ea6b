"""The escape suite: every attempt to leave the sandbox must fail, for real, under bubblewrap.

Modelled on Codex's sandbox tests. Each attempt runs a bash script in the sandbox over a fresh
workspace, then checks on the host that nothing happened (files unchanged, listener not
reached, processes gone). The controls at the bottom show the same checks do see an effect
when one is allowed, so these tests can fail.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from sbx_support import FAKE_SECRET, Listener, RunFn, gone

from sandbox.execute import CommandResult
from sandbox.limits import count_processes


@dataclass
class Arena:
    workspace: Path
    outside: Path
    listener: Listener
    home_marker: Path
    passwd_sha: str  # /etc/passwd before the attempt (another test may add its own user first)


@pytest.fixture
def arena(workspace: Path, listener: Listener) -> Arena:
    marker = Path.home() / f".clawloop-escape-test-{uuid.uuid4().hex[:8]}"
    marker.write_text("host home secret\n")
    try:
        passwd = _sha(Path("/etc/passwd"))
        yield Arena(workspace, workspace.parent / "outside", listener, marker, passwd)  # type: ignore[misc]
    finally:
        marker.unlink(missing_ok=True)


def _git(ws: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ws), *args], capture_output=True, text=True, check=False
    ).stdout


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# What the host process's /proc entry would show if the sandbox could see it.
HOST_ARGV0 = Path("/proc/self/cmdline").read_bytes().split(b"\0")[0].decode()
CORE_PATTERN = Path("/proc/sys/kernel/core_pattern").read_text()


def no_file(path: Callable[[Arena], Path]) -> Callable[[CommandResult, Arena], None]:
    def check(result: CommandResult, a: Arena) -> None:
        assert not path(a).exists(), f"{path(a)} was created: {result.stdout}{result.stderr}"

    return check


def not_in_output(text: Callable[[Arena], str]) -> Callable[[CommandResult, Arena], None]:
    def check(result: CommandResult, a: Arena) -> None:
        assert text(a) not in result.stdout + result.stderr

    return check


def listener_untouched(result: CommandResult, a: Arena) -> None:
    time.sleep(0.2)
    assert a.listener.hits == [], f"the host listener was reached: {result.stdout}{result.stderr}"
    assert "REACHED" not in result.stdout


def passwd_intact(result: CommandResult, a: Arena) -> None:
    assert _sha(Path("/etc/passwd")) == a.passwd_sha


def victim_intact(result: CommandResult, a: Arena) -> None:
    assert (a.outside / "victim.txt").read_text() == "untouched\n"


def failed(result: CommandResult, a: Arena) -> None:
    assert result.exit_code != 0, result.stdout


# (id, script, check); scripts see $OUT (the folder beside the workspace), $PORT, $UPORT,
# $MARKER (a file in the host's home folder) and $HOSTPID (this test process).
ATTEMPTS: list[tuple[str, str, Callable[[CommandResult, Arena], None]]] = [
    (
        "write-etc",
        "echo pwned > /etc/clawloop-escape",
        no_file(lambda a: Path("/etc/clawloop-escape")),
    ),
    (
        "write-usr",
        "echo pwned > /usr/local/clawloop-escape",
        no_file(lambda a: Path("/usr/local/clawloop-escape")),
    ),
    ("append-passwd", "echo 'evil::0:0::/:/bin/sh' >> /etc/passwd", passwd_intact),
    (
        "write-outside-absolute",
        "echo pwned > $OUT/escape.txt",
        no_file(lambda a: a.outside / "escape.txt"),
    ),
    (
        "write-outside-dotdot",
        "echo pwned > ../outside/escape.txt",
        no_file(lambda a: a.outside / "escape.txt"),
    ),
    ("overwrite-outside-file", "echo pwned > $OUT/victim.txt", victim_intact),
    (
        "write-host-home",
        "echo pwned > $MARKER.new; echo pwned > /root/escape",
        no_file(lambda a: Path(str(a.home_marker) + ".new")),
    ),
    (
        "symlink-to-etc-file",
        "ln -s /etc/passwd link && echo 'evil::0:0::/:/bin/sh' >> link",
        passwd_intact,
    ),
    (
        "symlink-to-outside-dir",
        "ln -s $OUT out && echo pwned > out/escape.txt",
        no_file(lambda a: a.outside / "escape.txt"),
    ),
    (
        "symlink-swap-file",
        "ln -sf $OUT/victim.txt hello.txt && echo pwned > hello.txt",
        victim_intact,
    ),
    ("hardlink-etc-file", "ln /etc/passwd hl && echo 'evil::0:0::/:/bin/sh' >> hl", passwd_intact),
    ("hardlink-outside-file", "ln $OUT/victim.txt hl && echo pwned >> hl", victim_intact),
    ("read-shadow", "cat /etc/shadow", not_in_output(lambda a: "root:")),
    (
        "read-host-home",
        "cat $MARKER; cat ~/$(basename $MARKER)",
        not_in_output(lambda a: "host home secret"),
    ),
    (
        "list-host-home-and-ssh",
        "ls -a /root $HOME ~root; cat /root/.ssh/id_rsa ~/.ssh/id_rsa",
        not_in_output(lambda a: a.home_marker.name),
    ),
    ("read-parent-env", "env; cat /proc/self/environ", not_in_output(lambda a: FAKE_SECRET)),
    (
        "read-host-process-env",
        "cat /proc/$HOSTPID/cmdline /proc/$HOSTPID/environ; cat /proc/*/cmdline /proc/*/environ",
        not_in_output(lambda a: HOST_ARGV0),
    ),
    (
        "kill-host-process",
        "kill -0 $HOSTPID && echo ALIVE-AND-VISIBLE",
        not_in_output(lambda a: "ALIVE-AND-VISIBLE"),
    ),
    ("curl-loopback", "curl -s -m 3 http://127.0.0.1:$PORT/ && echo REACHED", listener_untouched),
    ("nc-loopback", "nc -z -w 2 127.0.0.1 $PORT && echo REACHED", listener_untouched),
    (
        "python-socket",
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', $PORT), 2)"
        "; print('REACHED')\"",
        listener_untouched,
    ),
    ("bash-dev-tcp", "exec 3<>/dev/tcp/127.0.0.1/$PORT && echo REACHED", listener_untouched),
    (
        "udp-loopback",
        'python3 -c "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)'
        "; s.sendto(b'x', ('127.0.0.1', $UPORT))\"; echo x | nc -u -w 1 127.0.0.1 $UPORT",
        listener_untouched,
    ),
    (
        "remount-root",
        "mount -o remount,bind,rw / && echo pwned > /etc/clawloop-escape",
        no_file(lambda a: Path("/etc/clawloop-escape")),
    ),
    (
        "write-proc-sys",
        "echo '|/tmp/pwn' > /proc/sys/kernel/core_pattern",
        lambda r, a: (
            (failed(r, a), None)[1]
            if Path("/proc/sys/kernel/core_pattern").read_text() == CORE_PATTERN
            else pytest.fail("core_pattern changed")
        ),
    ),
    ("new-user-namespace", "unshare -Ur id && echo NESTED", not_in_output(lambda a: "NESTED")),
    (
        "su-to-root",
        "su -c 'touch /etc/clawloop-escape' root",
        no_file(lambda a: Path("/etc/clawloop-escape")),
    ),
    (
        "git-hooks",
        "echo 'touch /tmp/pwned' > .git/hooks/post-commit && chmod +x .git/hooks/post-commit",
        no_file(lambda a: a.workspace / ".git/hooks/post-commit"),
    ),
    (
        "git-config",
        "git config core.fsmonitor 'touch /tmp/pwned'",
        lambda r, a: (
            (failed(r, a), None)[1]
            if "fsmonitor" not in (a.workspace / ".git/config").read_text()
            else pytest.fail("git config written")
        ),
    ),
    (
        "raw-disk",
        "for d in /dev/vda /dev/sda /dev/nvme0n1 /dev/mem; do "
        "head -c 1 $d >/dev/null && echo READ $d; done",
        not_in_output(lambda a: "READ "),
    ),
]


@pytest.mark.parametrize(
    ("script", "check"), [a[1:] for a in ATTEMPTS], ids=[a[0] for a in ATTEMPTS]
)
def test_escape_attempt_fails(run: RunFn, arena: Arena, script: str, check) -> None:  # type: ignore[no-untyped-def]
    env = (
        f"OUT={arena.outside}; PORT={arena.listener.port}; UPORT={arena.listener.udp_port}; "
        f"MARKER={arena.home_marker}; HOSTPID={os.getpid()}; "
    )
    result = run(env + script, timeout=10)
    assert not result.timed_out, "an attempt should fail fast, not hang"
    check(result, arena)


def test_a_missing_hooks_folder_cannot_be_planted(run: RunFn, workspace: Path) -> None:
    hooks = workspace / ".git" / "hooks"
    for hook in hooks.iterdir():
        hook.unlink()
    hooks.rmdir()
    result = run("mkdir -p .git/hooks; echo 'touch /tmp/x' > .git/hooks/post-commit")
    assert result.exit_code != 0 and not (hooks / "post-commit").exists()


def test_fork_bomb_is_bounded(run: RunFn) -> None:
    script = (
        "python3 - <<'EOF'\nimport os, time\nn = 0\nfor i in range(500):\n"
        "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
        "    if pid == 0:\n        time.sleep(3)\n        os._exit(0)\n    n += 1\nprint(n)\nEOF"
    )
    uid = 65534 if os.geteuid() == 0 else os.geteuid()
    # RLIMIT_NPROC counts the user's processes machine-wide: the runner allows those already
    # running plus 64, and some of those may end while the bomb runs.
    already = count_processes(uid)
    result = run(script, timeout=20)
    started = int(result.stdout.strip())
    assert 0 < started <= 64 + already, (started, already)


def test_classic_fork_bomb_is_killed_and_leaves_nothing(run: RunFn) -> None:
    marker = f"bomb{uuid.uuid4().hex[:8]}"
    began = time.monotonic()
    result = run(f"b{marker}() {{ b{marker} | b{marker} & }}; b{marker}; sleep 30", timeout=3)
    assert result.timed_out and time.monotonic() - began < 10
    assert gone(marker) == []


def test_timeout_kills_a_process_that_ignores_sigterm(run: RunFn) -> None:
    marker = f"stubborn-{uuid.uuid4().hex}"
    script = (
        "python3 -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"time.sleep(60)' {marker}"
    )
    began = time.monotonic()
    result = run(script, timeout=1.5)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - began < 6
    assert gone(marker) == []


def test_timeout_kills_a_setsid_grandchild(run: RunFn) -> None:
    marker = f"runaway-{uuid.uuid4().hex}"
    script = f"setsid python3 -c 'import time; time.sleep(60)' {marker} & sleep 60"
    result = run(script, timeout=1.5)
    assert result.timed_out
    time.sleep(0.2)
    assert gone(marker) == []


def test_background_child_dies_when_the_command_ends(run: RunFn) -> None:
    marker = f"orphan-{uuid.uuid4().hex}"
    result = run(
        f"nohup setsid python3 -c 'import time; time.sleep(60)' {marker} >/dev/null 2>&1 &"
        " disown; echo started",
        timeout=10,
    )
    assert result.exit_code == 0 and not result.timed_out
    time.sleep(0.3)
    assert gone(marker) == []


def test_ten_gigabytes_of_output_is_capped_fast(run: RunFn) -> None:
    began = time.monotonic()
    result = run("head -c 10G /dev/zero | tr '\\0' 'x'", timeout=60)
    assert time.monotonic() - began < 15
    assert result.killed_for_output and result.truncated
    assert len(result.stdout) < 100_000


def test_a_huge_file_is_stopped_by_the_file_size_limit(run: RunFn, workspace: Path) -> None:
    result = run("head -c 10G /dev/zero > big.bin", timeout=30)
    assert result.exit_code != 0
    assert (workspace / "big.bin").stat().st_size <= 8 * 1024 * 1024


def test_memory_is_limited(run: RunFn) -> None:
    result = run("python3 -c 'x = bytearray(4 * 1024**3); print(\"ALLOCATED\")'")
    assert "ALLOCATED" not in result.stdout and result.exit_code != 0


def test_read_only_mode_refuses_workspace_writes(run: RunFn, workspace: Path) -> None:
    result = run("echo x > new.txt", mode="read-only")
    assert result.exit_code != 0 and not (workspace / "new.txt").exists()
    assert run("cat hello.txt", mode="read-only").stdout == "hello from the workspace\n"


# --- what must still work, and controls that show the checks can fail -------------------------


def test_workspace_writes_and_reads_work(run: RunFn, workspace: Path) -> None:
    result = run(
        "mkdir -p sub && echo made > sub/new.txt && cat hello.txt && echo t > /tmp/t && cat /tmp/t"
    )
    assert result.exit_code == 0, result.stderr
    assert (workspace / "sub" / "new.txt").read_text() == "made\n"
    assert "hello from the workspace" in result.stdout


def test_python_and_git_work(run: RunFn, workspace: Path) -> None:
    script = (
        "python3 -c 'print(6 * 7)' && echo more >> hello.txt && git status --short && "
        "git diff --stat && git log --oneline"
    )
    result = run(script)
    assert result.exit_code == 0, result.stderr
    assert "42" in result.stdout and "M hello.txt" in result.stdout and "init" in result.stdout
    # .git is read-only inside: committing is for the user, outside.
    commit = run("git -c user.name=a -c user.email=a@example.invalid commit -qam change")
    assert commit.exit_code != 0
    assert "change" not in _git(workspace, "log", "--oneline")


def test_control_full_access_reaches_the_listener(run: RunFn, listener: Listener) -> None:
    result = run(f"curl -s -m 3 http://127.0.0.1:{listener.port}/ ; echo done", mode="full-access")
    time.sleep(0.2)
    assert "tcp" in listener.hits, result.stderr


def test_control_off_backend_writes_outside(run: RunFn, workspace: Path) -> None:
    target = workspace.parent / "outside" / "from-off.txt"
    result = run(f"echo x > {target}", backend="off")
    assert result.exit_code == 0 and target.exists()
