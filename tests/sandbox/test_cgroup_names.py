"""Groups left behind by killed processes never break a later run (sandbox/cgroup.py).

A plain folder stands in for the cgroup hierarchy here: naming and sweeping are folder
operations, and rmdir refuses a non-empty folder as the kernel refuses a group with a process in
it. The real hierarchy is exercised by the sandbox's exhaustion tests.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from sandbox.cgroup import CgroupPlace, create, sweep


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_sweep_removes_only_empty_groups_of_processes_no_longer_running(tmp_path: Path) -> None:
    gone = dead_pid()
    stale = tmp_path / f"clawloop-{gone}-0"
    stale_new = tmp_path / f"clawloop-{gone}-3-0a1b2c3d"
    busy = tmp_path / f"clawloop-{gone}-1"  # something still in it
    live = tmp_path / f"clawloop-{os.getpid()}-0"
    other = tmp_path / "session-12"
    for folder in (stale, stale_new, busy, live, other):
        folder.mkdir()
    (busy / "cgroup.procs").write_text("")
    assert sorted(sweep(tmp_path)) == sorted([stale, stale_new])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([busy.name, live.name, other.name])


def test_a_left_over_group_with_this_pid_does_not_stop_a_new_one(tmp_path: Path) -> None:
    memory, pids = tmp_path / "memory", tmp_path / "pids"
    memory.mkdir()
    pids.mkdir()
    # What a killed process whose pid this process now has would have left, for the next names.
    for n in range(64):
        (pids / f"clawloop-{os.getpid()}-{n}").mkdir()
    place = CgroupPlace(1, memory, pids)
    first = create(place, 1 << 20, 16)
    second = create(place, 1 << 20, 16)
    names = [f.name for f in (*first.folders, *second.folders)]
    assert len(names) == 4 and len(set(names)) == 2
    assert all((f / "pids.max").read_text() == "16" for f in (first.folders[1], second.folders[1]))


def test_a_group_still_busy_when_removed_goes_when_the_next_one_is_made(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    place = CgroupPlace(2, memory, memory)
    first = create(place, 1 << 20, 16)
    [folder] = first.folders
    first.remove()  # its limit files are still in it, as a group's last process is
    assert folder.is_dir()
    for leftover in folder.iterdir():
        leftover.unlink()
    second = create(place, 1 << 20, 16)
    assert not folder.exists() and second.folders[0].is_dir()
