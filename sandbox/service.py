"""A long-running program (an MCP stdio server) under the same sandbox as a command.

A command is started, waited for and killed by :mod:`sandbox.runner`; a server is started by
whoever speaks its protocol (the MCP client spawns it and owns its pipes). What this module
hands over is a command line that builds the very same sandbox around it: the system view
read-only, private /tmp, /dev/shm and /run, no homes, clawloop's folders hidden, a cleared
environment, the seccomp filter, the resource limits as ``ulimit``\\ s, its own cgroup, its own
pid namespace that dies with clawloop, the unprivileged uid when clawloop is root, and no
network but the declared hosts through the egress proxy. The only additions are what the
server declares: host folders to read (its own folder among them).

The launcher that spawns the line (``anyio.open_process``) passes no descriptors, so the two a
bubblewrap command line needs (the scratch folder it runs in and the seccomp filter) are
opened by name in the small ``sh`` that joins the cgroup, just before it becomes bwrap.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sandbox.bwrap import SAFE_PATH, SYSTEM_PATHS, MountPlan, bwrap_args, bwrap_path
from sandbox.egress import EgressProxy
from sandbox.exec_guard import compiled_guard
from sandbox.limits import prlimit_argv, setpriv_argv, ulimit_script
from sandbox.runner import home_folders
from sandbox.seccomp import program, supported

if TYPE_CHECKING:
    from sandbox.runner import SandboxRunner

# The descriptors the cgroup-joining sh opens for bwrap.
_SCRATCH_FD = 3
_FILTER_FD = 4


@dataclass(slots=True)
class ServiceLaunch:
    """The command line to spawn a server with, and what to clean up once it has stopped."""

    argv: list[str]
    env: dict[str, str]
    proxy: EgressProxy | None = None
    folders: list[str] = field(default_factory=list)
    # Held while the server runs: the runner's cgroup is removed when the runner goes.
    runner: SandboxRunner | None = None

    def close(self) -> None:
        """Stop the proxy and remove the scratch folders (call after the server is gone)."""
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
        while self.folders:
            shutil.rmtree(self.folders.pop(), ignore_errors=True)
        self.runner = None


def service_launch(
    runner: SandboxRunner,
    argv: Sequence[str],
    read: Sequence[str | Path] = (),
    env: Mapping[str, str] | None = None,
) -> ServiceLaunch:
    """How to start ``argv`` as a long-running server under ``runner``'s sandbox.

    ``read`` are host folders the server may read besides the system; the folder of a program
    or script named by an absolute path in ``argv`` is added (the server's own files). ``env``
    are variables the user declared for it, added to the command's usual environment.
    """
    env = {**runner.env(), **(env or {})}
    if not runner.sandboxed:
        uid = os.geteuid()
        inner = [*prlimit_argv(runner.settings.limits, uid), *argv]
        return ServiceLaunch(["env", "-i", *(f"{k}={v}" for k, v in env.items()), *inner], {})
    folders = [_folder(runner)]
    launch = ServiceLaunch([], {"PATH": SAFE_PATH}, folders=folders, runner=runner)
    try:
        scratch, private = folders[0], tempfile.mkdtemp(prefix="clawloop-filter-")
        folders.append(private)
        root = os.geteuid() == 0
        uid = runner.settings.sandbox_uid if root else os.geteuid()
        readable = _readable([*read, *_own_folders(argv)])
        plan = MountPlan(
            Path(scratch), _SCRATCH_FD, "workspace-write", env, runner.settings.limits.tmp_size_mb
        )
        plan.read_only = readable
        for path in _hidden(runner, readable):
            (plan.hidden if path.is_dir() else plan.covered).append(path)
        if root:
            plan.drop_to = (uid, uid)
        plan.exec_guard = compiled_guard()
        plan.tmp_inodes = runner.settings.limits.tmp_inodes
        opens = f"exec {_SCRATCH_FD}<{shlex.quote(scratch)}; "
        if supported():
            filter_path = Path(private) / "seccomp.bpf"
            filter_path.write_bytes(program())
            plan.seccomp_fd = _FILTER_FD
            opens += f"exec {_FILTER_FD}<{shlex.quote(str(filter_path))}; "
        if runner.network:
            launch.proxy = EgressProxy(list(runner.network))
            plan.proxy_socket = launch.proxy.start()
        line = bwrap_args(plan, list(argv), bwrap_path(), setpriv_argv(0)[0])
        limits = ulimit_script(runner.settings.limits, uid)
        launch.argv = runner.cgroup().wrap(line, opens + limits)
    except BaseException:
        launch.close()
        raise
    return launch


def _folder(runner: SandboxRunner) -> str:
    """The server's scratch folder (its working folder), writable by the uid it runs as."""
    folder = tempfile.mkdtemp(prefix="clawloop-service-")
    if os.geteuid() == 0:
        uid = runner.settings.sandbox_uid
        os.chown(folder, uid, uid)
    return folder


def _own_folders(argv: Sequence[str]) -> list[Path]:
    """Folders of the program and scripts ``argv`` names by absolute path, outside the system."""
    found = []
    for arg in argv:
        if os.path.isabs(arg) and os.path.isfile(arg):
            folder = Path(os.path.realpath(arg)).parent
            if not _under_system(folder) and folder != Path("/"):
                found.append(folder)
    return found


def _readable(paths: Sequence[str | Path]) -> list[Path]:
    """Existing folders and files, resolved (a link cannot move the mount), without repeats."""
    found: list[Path] = []
    for path in paths:
        real = Path(os.path.realpath(Path(path).expanduser()))
        if real.exists() and real != Path("/") and real not in found:
            found.append(real)
    return found


def _hidden(runner: SandboxRunner, readable: list[Path]) -> list[Path]:
    """clawloop's folders and the user's homes where the view would show them."""
    found = []
    for path in [*runner.hidden, *home_folders(runner.environ)]:
        path = Path(os.path.abspath(path))
        if not os.path.lexists(path) or os.path.islink(path):
            continue
        shown = _under_system(path) or any(_inside(path, r) for r in readable)
        if shown and path not in found:
            found.append(path)
    return found


def _under_system(path: Path) -> bool:
    return any(_inside(path, Path(p)) for p in SYSTEM_PATHS)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
