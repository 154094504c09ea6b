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

from agent.errors import UserError
from sandbox import exec_guard, relay_build, seccomp
from sandbox.cgroup import find_place
from sandbox.egress import MAX_CONNECTIONS, POOL_THREADS
from sandbox.limits import file_size_mb
from sandbox.runner import Grant
from sandbox.scan import TOOL_FILES
from sandbox.settings import SandboxSettings
from sandbox.workspace import installation, protect_installation


@dataclass(slots=True, frozen=True)
class Check:
    """One guarantee and whether this machine gives it."""

    name: str
    holds: bool
    detail: str


def _why_true_fails(settings: SandboxSettings, grant: Grant, otherwise: str) -> str | None:
    """Why ``true`` does not run in a sandbox of ``settings`` and ``grant``: the first line of
    the error or of its stderr (``otherwise`` when that is empty); None when it runs."""
    from sandbox.runner import SandboxRunner

    with tempfile.TemporaryDirectory() as tmp:
        try:
            result = SandboxRunner(settings, Path(tmp), grant=grant).run(["true"], timeout=30)
        except Exception as exc:  # the report says why instead of failing
            return str(exc).splitlines()[0]
    if result.exit_code == 0:
        return None
    return (result.stderr.strip().splitlines() or [otherwise])[0]


def _bwrap_starts() -> tuple[bool, str]:
    why = _why_true_fails(SandboxSettings(), Grant(), "it did not start")
    if why is not None:
        return False, why
    how = "as root, dropping to another uid" if os.geteuid() == 0 else "in a user namespace"
    return True, f"it starts a sandbox ({how})"


def _relay_starts() -> tuple[bool, str]:
    """Whether a command with a declared host starts (the proxy and its relay inside)."""
    settings = SandboxSettings(mode="read-only")
    why = _why_true_fails(settings, Grant(network=["127.0.0.1:9"]), "the relay did not start")
    if why is not None:
        return False, why
    return True, (
        "only the declared hosts, through the filtering proxy; nothing else "
        f"(the relay: {relay_build.describe()})"
    )


def _scratch_files(inodes: int) -> str:
    """How many files /tmp and /dev/shm may hold, and what holds that bound here."""
    if exec_guard.compiled_guard() is None:
        return "their file counts are bounded by memory only (no exec guard)"
    return f"at most {inodes} files each (nr_inodes, set by the exec guard)"


def _program_view() -> tuple[bool, str]:
    """Whether a skill's command starts in a view of only its programs, under the exec guard."""
    settings = SandboxSettings(mode="read-only")
    why = _why_true_fails(settings, Grant(programs=["true"]), "the view did not start")
    if why is not None:
        return False, why
    guard = exec_guard.describe()
    if exec_guard.compiled_guard() is None:
        return (
            False,
            f"only the declared programs are in the view, but {guard}: a file the "
            "skill can read or write can be run through the loader",
        )
    return True, f"only the declared programs run; every other mount is noexec ({guard})"


def _installation(workspace: Path | None, ok: bool) -> tuple[bool, str]:
    """Where clawloop runs from, and whether it lies in the workspace (then kept read-only)."""
    places = installation()
    shown = ", ".join(sorted({str(p) for p in places}))
    if workspace is None:
        return True, f"runs from {shown}"
    try:
        kept = protect_installation(workspace, ok, places)
    except UserError as exc:
        return False, exc.message
    if kept:
        return ok, f"in the workspace, kept read-only: {', '.join(map(str, kept))}"
    return True, f"outside the workspace: {shown}"


def checks(settings: SandboxSettings | None = None, workspace: Path | None = None) -> list[Check]:
    """Every guarantee, in the order docs/sandbox.md lists them (``workspace``: where the
    installation is checked against)."""
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
            "only /usr, /etc, /opt and the /bin, /sbin, /lib links, read-only; no homes, /var, "
            "/run, /srv, /mnt; the workspace read-write at its own path",
        ),
        Check(
            "shared places and sockets",
            ok,
            f"private /tmp and /var/tmp ({limits.tmp_size_mb} MB) and /dev/shm (64 MB); host "
            "unix sockets out of view, those in the workspace covered",
        ),
        Check("network", ok, "none, not even the host's loopback (full-access shares it)"),
        Check("a skill's hosts", *(_relay_starts() if ok else (False, "no sandbox"))),
        Check(
            "a skill's write paths",
            ok,
            "the workspace read-only but for the paths the skill declares",
        ),
        Check("a skill's programs", *(_program_view() if ok else (False, "no sandbox"))),
        Check(
            "git metadata",
            ok,
            "every .git, gitdir target and hooks path in the workspace mounted read-only",
        ),
        Check(
            "nothing created for later",
            ok,
            "a new .git or start-up file is renamed NAME.clawloop-refused after the command, "
            "and its program-running config keys reported",
        ),
        Check("start-up files", ok, "read-only when they exist, refused when created"),
        Check(
            "environments and tool files",
            ok,
            "every virtual environment (pyvenv.cfg, conda-meta) and node_modules folder "
            f"read-only; {', '.join(sorted(TOOL_FILES))} read-only, refused when created",
        ),
        Check("clawloop's installation", *_installation(workspace, ok)),
        Check(
            "clawloop's own folders",
            ok,
            "config, data, audit log and sessions covered wherever the view would show them",
        ),
        Check("refused workspaces", True, "/, the home folder, a folder holding the config"),
        Check("the user's home", ok, "not in the view, and covered where it would be"),
        Check("processes", ok, "own pid namespace, killed as a whole"),
        Check(
            "kernel keyrings",
            ok and seccomp.supported(),
            "keyctl, add_key and request_key refused; /proc/keys empty"
            if seccomp.supported()
            else "no filter here: the session keyring is readable",
        ),
        Check(
            "seccomp",
            ok and seccomp.supported(),
            "fallocate, io_uring, clone3, new user namespaces, inotify and other ABIs refused"
            if seccomp.supported()
            else f"no filter for {os.uname().machine}: fallocate can reserve disk",
        ),
        Check(
            "limits",
            True,
            f"cpu {limits.cpu_s} s, address space {limits.memory_mb} MB, file "
            f"{limits.file_size_mb} MB, open files {limits.open_files}, {limits.processes} more "
            f"processes, no core",
        ),
        Check(
            "disk",
            True,
            f"/tmp, /var/tmp ({limits.tmp_size_mb} MB) and /dev/shm: hard bounds (tmpfs size); "
            f"{_scratch_files(limits.tmp_inodes)}; one file at most {file_size_mb(limits)} MB "
            f"(hard); the workspace: {limits.disk_budget_mb} MB and {limits.inode_budget} new "
            "files, polled every 50 ms (a fallback: this file system has no project quota "
            "clawloop sets), so a fast writer can overshoot by what it writes in that time",
        ),
        Check(
            "network proxy threads",
            True,
            f"one shared pool of {POOL_THREADS} threads; at most {MAX_CONNECTIONS} connections "
            "open at once per command or server, the rest refused",
        ),
        Check(
            "MCP stdio servers",
            ok,
            "started in the same sandbox as a command (view, limits, cgroup, seccomp, proxy), "
            "plus only the folders and hosts they declare; stderr shown with controls escaped",
        ),
        Check(
            "root",
            ok,
            "clawloop is root: commands run as the workspace's owner, or as uid "
            f"{settings.sandbox_uid} with an ACL on the workspace's own inodes for the command"
            if root
            else f"not root: commands run as uid {os.geteuid()} in a user namespace",
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
