"""What the sandbox can and cannot enforce on this machine, checked live (``agent doctor``).

Each line is one guarantee from docs/sandbox.md with whether it holds here. The checks start
a real sandbox where that is the only way to know (user namespaces, seccomp).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sandbox import seccomp
from sandbox.cgroup import find_place
from sandbox.settings import SandboxSettings


@dataclass(slots=True, frozen=True)
class Check:
    """One guarantee and whether this machine gives it."""

    name: str
    holds: bool
    detail: str


def _bwrap_starts() -> tuple[bool, str]:
    from sandbox.runner import SandboxRunner

    with tempfile.TemporaryDirectory() as tmp:
        try:
            result = SandboxRunner(SandboxSettings(), Path(tmp)).run(["true"], timeout=30)
        except Exception as exc:  # the report says why instead of failing
            return False, str(exc).splitlines()[0]
    if result.exit_code == 0:
        return True, "bubblewrap starts a sandbox (user, pid, net, ipc, uts namespaces)"
    return False, (result.stderr.strip().splitlines() or ["it did not start"])[0]


def checks(settings: SandboxSettings | None = None) -> list[Check]:
    """Every guarantee, in the order docs/sandbox.md lists them."""
    settings = settings or SandboxSettings()
    limits = settings.limits
    found: list[Check] = []
    bwrap = shutil.which("bwrap")
    if settings.backend == "off":
        found.append(Check("sandbox", False, "backend is off: commands run unsandboxed"))
        return found
    if bwrap is None:
        found.append(Check("bubblewrap", False, "not installed: `apt-get install bubblewrap`"))
        return found
    ok, detail = _bwrap_starts()
    found.append(Check("bubblewrap", ok, f"{bwrap}: {detail}"))
    root = os.geteuid() == 0
    found += [
        Check(
            "file view",
            ok,
            "only /usr, /etc, /opt and the /bin, /lib links are visible (read-only); homes, "
            "/var, /run, /srv, /mnt and the host's world-writable folders and sockets are not",
        ),
        Check("workspace", ok, "read-write at its own path (read-only in read-only mode)"),
        Check(
            "git metadata",
            ok,
            "every .git, gitdir target and hooks path in the workspace is mounted read-only; "
            "a new .git or start-up file is moved aside after the command and reported",
        ),
        Check("network", ok, "none (full-access shares the host's network)"),
        Check(
            "private tmpfs",
            ok,
            f"/tmp and /var/tmp {limits.tmp_size_mb} MB, /dev/shm 64 MB; / and /dev read-only",
        ),
        Check("processes", ok, "own pid namespace, killed as a whole on timeout"),
        Check(
            "uid",
            ok,
            "clawloop is root: commands run as the workspace's owner, or as uid "
            f"{settings.sandbox_uid} with a per-command ACL on the workspace's own inodes"
            if root
            else f"commands run as uid {os.geteuid()} with no capabilities",
        ),
        Check(
            "seccomp",
            ok and seccomp.supported(),
            "fallocate, io_uring and other ABIs refused"
            if seccomp.supported()
            else f"no filter for {os.uname().machine}: fallocate can reserve disk",
        ),
        Check(
            "per-process limits",
            True,
            f"cpu {limits.cpu_s} s, address space {limits.memory_mb} MB, file {limits.file_size_mb}"
            f" MB, open files {limits.open_files}, {limits.processes} more processes, no core",
        ),
        Check(
            "disk budget",
            True,
            f"a command that grows the workspace's file system by {limits.disk_budget_mb} MB is "
            "killed (checked every 50 ms)",
        ),
    ]
    place = find_place()
    if place.usable:
        pids = " and processes" if place.pids is not None else ""
        found.append(
            Check(
                "memory for the whole tree",
                True,
                f"cgroup v{place.version} under {place.memory}: {limits.memory_mb} MB{pids}",
            )
        )
    else:
        found.append(
            Check(
                "memory for the whole tree",
                False,
                f"no cgroup can be created ({place.reason}); memory is limited per process only",
            )
        )
    try:
        import re2  # noqa: F401

        found.append(Check("files search", True, "RE2: linear time, cannot hang"))
    except ImportError:
        found.append(Check("files search", False, "google-re2 missing: `pip install google-re2`"))
    return found
