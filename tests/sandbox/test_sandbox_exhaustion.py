"""No host exhaustion: disk, memory for the whole tree, open files, every tmpfs.

Each attempt tries to take more of the host than its limits allow; the judge measures on the
host what was taken (blocks in the workspace, what the processes managed to record there).
The controls show the same measurement sees the taking when the limit is not there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sbx_support import RunFn

from sandbox.cgroup import find_place
from sandbox.doctor import checks

_MB = 1024 * 1024


def _blocks(path: Path) -> int:
    """Bytes the workspace really holds on disk (allocated blocks, not apparent sizes)."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total


DISK_ATTEMPTS = {
    "fallocate": "fallocate -l 1G big.bin",
    "fallocate-keep-size": "touch k.bin; fallocate --keep-size -l 1G k.bin",
    "posix-fallocate": "python3 -c \"import os; f=os.open('p.bin', os.O_CREAT|os.O_WRONLY); "
    'os.posix_fallocate(f, 0, 1 << 30)"',
    "fallocate-punch-and-grow": "head -c 1M /dev/zero > g.bin; fallocate -o 1M -l 1G g.bin",
    "many-files-past-the-budget": "for i in $(seq 1 40); do head -c 8M /dev/urandom > f$i.bin "
    "|| break; done",
    "parallel-writers-past-the-budget": "for j in 1 2 3 4; do (for i in $(seq 1 10); do "
    "head -c 8M /dev/urandom > w$j-$i.bin; done) & done; wait",
}


@pytest.mark.parametrize("script", DISK_ATTEMPTS.values(), ids=DISK_ATTEMPTS.keys())
def test_the_workspace_disk_budget_holds(run: RunFn, workspace: Path, script: str) -> None:
    run(script, timeout=60, limits={"disk_budget_mb": 48})
    # 48 MB budget, checked every 50 ms: at most a few more MB get through.
    assert _blocks(workspace) < 96 * _MB, _blocks(workspace) // _MB


@pytest.mark.parametrize("script", DISK_ATTEMPTS.values(), ids=DISK_ATTEMPTS.keys())
def test_control_disk_taken_without_the_sandbox_is_seen(
    run: RunFn, workspace: Path, script: str
) -> None:
    run(script, timeout=60, backend="off", limits={"file_size_mb": 1100})
    assert _blocks(workspace) >= 96 * _MB


def test_a_killed_command_is_told_why(run: RunFn) -> None:
    result = run(DISK_ATTEMPTS["many-files-past-the-budget"], limits={"disk_budget_mb": 16})
    assert result.killed_for_disk and result.exit_code is None
    assert "disk budget" in " ".join(result.notes)


FILL = (
    "python3 - {target} <<'EOF'\nimport sys\nn = 0\ntry:\n    with open(sys.argv[1], 'wb') as f:\n"
    "        for n in range(1, 4097):\n"
    "            f.write(b'x' * 65536 * 16)\n            f.flush()\n"
    "except OSError:\n    n -= 1\nopen('filled.txt', 'w').write(str(n))\nEOF"
)


@pytest.mark.parametrize(
    ("target", "limit_mb"), [("/dev/shm/fill", 64), ("/tmp/fill", 32), ("/var/tmp/fill", 32)]
)
def test_every_tmpfs_is_size_limited(
    run: RunFn, workspace: Path, target: str, limit_mb: int
) -> None:
    run(FILL.format(target=target), timeout=60, limits={"tmp_size_mb": 32, "file_size_mb": 4096})
    filled_mb = int((workspace / "filled.txt").read_text())  # in units of 1 MB
    assert filled_mb <= limit_mb, filled_mb


def test_control_fill_counts_what_it_wrote(run: RunFn, workspace: Path) -> None:
    run(FILL.format(target="fill.bin"), timeout=60, backend="off", limits={"file_size_mb": 200})
    assert int((workspace / "filled.txt").read_text()) >= 150


@pytest.mark.parametrize("target", ["/fill", "/dev/fill", "/home/fill", "/run/fill"])
def test_the_other_mounts_take_nothing(run: RunFn, workspace: Path, target: str) -> None:
    run(FILL.format(target=target), timeout=30)
    assert int((workspace / "filled.txt").read_text()) <= 0


OPEN_FILES = (
    "cat > o.py <<'EOF'\nimport os\nfds = []\ntry:\n    for _ in range(200000):\n"
    "        fds.append(os.open('/dev/null', os.O_RDONLY))\nexcept OSError:\n    pass\n"
    "n = len(fds)\nfor fd in fds:\n    os.close(fd)\n"
    "open('fds-%d.txt' % os.getpid(), 'w').write(str(n))\nEOF\n"
)


def test_open_files_are_limited(run: RunFn, workspace: Path) -> None:
    script = OPEN_FILES + "for i in 1 2 3 4; do python3 o.py & done; wait"
    run(script, limits={"open_files": 256})
    counts = [int(p.read_text()) for p in workspace.glob("fds-*.txt")]
    assert len(counts) == 4 and max(counts) <= 256, counts


def test_control_open_files_count_more_without_the_limit(run: RunFn, workspace: Path) -> None:
    run(OPEN_FILES + "python3 o.py", backend="off", limits={"open_files": 4096})
    counts = [int(p.read_text()) for p in workspace.glob("fds-*.txt")]
    assert counts and max(counts) > 1000, counts


# Each process records success only after holding its 200 MB for 5 s: the kernel may kill a
# process that already holds its memory, so a mark written on allocation would count it too.
MEMORY = (
    'for i in 1 2 3 4; do python3 -c "import time; x = bytearray(200 * 1024 * 1024); '
    "x[::4096] = b'y' * len(x[::4096]); time.sleep(5); open('mem-$i.ok', 'w').write('1')\" & "
    "done; wait"
)


def test_memory_is_limited_for_the_whole_tree(run: RunFn, workspace: Path) -> None:
    place = find_place()
    if not place.usable:
        # Where no cgroup can be made, the sandbox must say so rather than pretend.
        report = {c.name: c for c in checks()}
        assert not report["memory for the whole tree"].holds
        return
    run(MEMORY, timeout=30, limits={"memory_mb": 450})
    # Four processes of 200 MB each fit the per-process limit; together they do not.
    assert len(list(workspace.glob("mem-*.ok"))) <= 2


def test_control_memory_taken_without_the_cgroup_is_seen(run: RunFn, workspace: Path) -> None:
    run(MEMORY, timeout=30, backend="off", limits={"memory_mb": 450})
    assert len(list(workspace.glob("mem-*.ok"))) == 4
