"""The bubblewrap command line for one sandboxed command, and the workspace grant for root.

The view a command gets: the host's root read-only, the workspace read-write (read-only in
read-only mode), private /tmp, /home, /root and /run, no network (except full-access), a
cleared environment, no new user namespaces, /proc/sys read-only, and its own pid namespace
that dies with clawloop. When clawloop runs as root the command runs as an unprivileged uid,
because root inside bubblewrap can still remount /, read /etc/shadow and write /proc/sys.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from agent.errors import UserError

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
INSTALL_HINT = (
    "install it with `apt-get install bubblewrap`, or run with `--sandbox off` "
    "(commands then run unsandboxed, with only a timeout)"
)


@dataclass(slots=True)
class MountPlan:
    """What one sandboxed command sees; fds are opened by the caller and passed through."""

    workspace: Path
    workspace_fd: int
    protected: list[tuple[int, Path]]  # read-only binds over paths inside the workspace
    mode: str
    env: dict[str, str]
    tmp_size_mb: int


def bwrap_path() -> str:
    """The bwrap binary, or :class:`UserError` with the install command."""
    found = shutil.which("bwrap")
    if found is None:
        raise UserError(f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
    return found


def bwrap_args(plan: MountPlan, argv: list[str], bwrap: str = "bwrap") -> list[str]:
    """The full command line: bwrap, its options, then ``argv``."""
    ws = str(plan.workspace)
    if plan.mode == "full-access":
        args = [
            bwrap,
            "--bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-all",
            "--share-net",
        ]
    else:
        args = [
            bwrap,
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--size",
            str(plan.tmp_size_mb * 1024 * 1024),
            "--tmpfs",
            "/tmp",
            "--tmpfs",
            "/home",
            "--tmpfs",
            "/root",
            "--tmpfs",
            "/run",
            "--unshare-all",
        ]
    args += ["--ro-bind", "/proc/sys", "/proc/sys"]
    bind = "--ro-bind-fd" if plan.mode == "read-only" else "--bind-fd"
    args += [bind, str(plan.workspace_fd), ws]
    for fd, path in plan.protected:
        args += ["--ro-bind-fd", str(fd), str(path)]
    args += [
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--chdir",
        ws,
        "--clearenv",
    ]
    for key, value in plan.env.items():
        args += ["--setenv", key, value]
    if os.geteuid() == 0:
        args += ["--cap-drop", "ALL"]
    return [*args, "--", *argv]


_granted: set[tuple[str, int, bool]] = set()


def grant_workspace(workspace: Path, uid: int, write: bool) -> None:
    """Give ``uid`` access to the workspace with POSIX ACLs (once per process and workspace).

    Used when clawloop runs as root and commands run as ``uid``. A default ACL on every folder
    makes files created later (by root or by the command) accessible too. Parent folders that
    others cannot search get a search-only (x) entry, so bwrap can reach the workspace. To
    undo: ``setfacl -R -x u:UID,d:u:UID WORKSPACE``.
    """
    key = (str(workspace), uid, write)
    if key in _granted:
        return
    setfacl = shutil.which("setfacl")
    if setfacl is None:
        raise UserError(
            "clawloop runs as root, so sandboxed commands run as an unprivileged "
            "user that needs an ACL on the workspace: `apt-get install acl`"
        )
    perms = "rwX" if write else "rX"
    _setfacl(setfacl, ["-R", "-m", f"u:{uid}:{perms},d:u:{uid}:{perms}", str(workspace)], uid)
    for parent in workspace.parents:
        if parent != Path("/") and not os.stat(parent).st_mode & stat.S_IXOTH:
            _setfacl(setfacl, ["-m", f"u:{uid}:x", str(parent)], uid)
    _granted.add(key)


def _setfacl(setfacl: str, args: list[str], uid: int) -> None:
    result = subprocess.run([setfacl, *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        first = (result.stderr.strip().splitlines() or ["unknown error"])[0]
        raise UserError(
            f"could not give the sandbox user (uid {uid}) access with setfacl "
            f"({first}); the file system must support POSIX ACLs"
        )
