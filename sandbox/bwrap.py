"""The bubblewrap command line for one sandboxed command.

The view a command gets (workspace-write and read-only modes): an empty, read-only root with
only the system folders (``/usr``, ``/etc``, ``/opt``, ...) bound read-only, so the host's
homes, ``/var``, ``/run``, ``/srv``, ``/mnt``, its world-writable folders and their unix
sockets are simply not there; private size-limited ``/tmp`` (``/var/tmp`` points into it) and
``/dev/shm``; a read-only ``/dev`` with the usual devices; the workspace read-write at its own
path, mounted from a descriptor; git metadata, start-up files and sockets in the workspace
covered; clawloop's own folders and the user's home hidden. A command that may write only
some paths gets the workspace read-only with those parts read-write over it. No network
(except full-access, or through the per-host proxy of :mod:`sandbox.egress` where hosts are
allowed), a cleared environment, no new user namespaces, a seccomp filter, and its own pid
namespace that dies with clawloop.

When clawloop runs as root, bubblewrap runs as root too (so it can mount the workspace from a
descriptor without any permission on the folders above it) and the command is started inside
through ``setpriv``, which drops to the sandbox uid with every capability gone before
anything of the command's runs. Otherwise bubblewrap runs unprivileged in a user namespace.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from agent.errors import UserError
from sandbox.exec_guard import GUARD_BINARY, SCRATCH, UNPRIVILEGED_CAPS, guard_argv
from sandbox.helper_build import CompiledHelper
from sandbox.relay_build import CompiledRelay, compiled_relay

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
INSTALL_HINT = (
    "install it with `apt-get install bubblewrap`, or run with `--sandbox off` "
    "(commands then run unsandboxed, with only a timeout)"
)
# What of the host a command sees, read-only. Everything else is absent.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
EMPTY_DIRS = ("/home", "/root", "/run", "/var", "/mnt", "/srv")
SHM_SIZE_MB = 64
KEY_LISTS = ("/proc/keys", "/proc/key-users")
_MB = 1024 * 1024
# Where the proxy's socket appears inside, the compiled relay beside it, and the port the
# relay listens on there.
PROXY_SOCKET = "/run/clawloop/proxy.sock"
RELAY_BINARY = "/run/clawloop/relay"
RELAY_PORT = 3128
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY")


@dataclass(slots=True)
class MountPlan:
    """What one sandboxed command sees; fds are opened by the caller and passed through."""

    workspace: Path
    workspace_fd: int
    mode: str
    env: dict[str, str]
    tmp_size_mb: int
    protected: list[tuple[int, Path]] = field(default_factory=list)  # read-only, in workspace
    covered: list[Path] = field(default_factory=list)  # files replaced by an empty /dev/null
    hidden: list[Path] = field(default_factory=list)  # folders replaced by an empty tmpfs
    seccomp_fd: int | None = None
    drop_to: tuple[int, int] | None = None  # (uid, gid) for setpriv inside, when run as root
    # When set, the workspace is read-only but for these parts (fds opened by the caller).
    writable: list[tuple[int, Path]] | None = None
    proxy_socket: Path | None = None  # the host-side socket of the per-host network proxy
    read_only: list[Path] = field(default_factory=list)  # declared host folders, read-only
    # When set, the system view holds only some programs: these bwrap options build it
    # (:mod:`sandbox.programs`) in place of the system folders.
    programs: list[str] | None = None
    # When set, the workspace shows only these parts, read-only (fds opened by the caller);
    # the writable parts are shown too. Nothing else of it is there.
    visible: list[tuple[int, Path]] | None = None
    # When set, the exec guard starts the command (:mod:`sandbox.exec_guard`): after bounding
    # the inodes of /tmp and /dev/shm to ``tmp_inodes`` each, and, with ``programs``, making
    # every mount but the ``keep_exec`` mount points noexec.
    exec_guard: CompiledHelper | None = None
    keep_exec: list[str] = field(default_factory=list)
    tmp_inodes: int | None = None


def bwrap_path() -> str:
    """The bwrap binary, or :class:`UserError` with the install command."""
    found = shutil.which("bwrap")
    if found is None:
        raise UserError(f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
    return found


def relay_python() -> str:
    """A python3 inside the sandbox's view, for relay.py, or :class:`UserError`."""
    found = shutil.which("python3", path=SAFE_PATH)
    real = os.path.realpath(found) if found else ""
    if not found or not any(_inside(Path(real), Path(p)) for p in SYSTEM_PATHS):
        raise UserError(
            "network hosts need the sandbox's network relay: a C compiler to build relay.c "
            "(apt-get install gcc libc6-dev), or python3 in the system folders to run relay.py "
            "(apt-get install python3); without either a command gets no network at all"
        )
    return found


def relay_argv(relay: CompiledRelay | None) -> list[str]:
    """The relay's command line, which then becomes the command after it: the compiled relay
    (bound at :data:`RELAY_BINARY`), else ``python3 -I -S -c RELAY`` (no site, no PYTHON*
    variables), each followed by ``SOCKET PORT``."""
    if relay is not None:
        return [RELAY_BINARY, PROXY_SOCKET, str(RELAY_PORT)]
    source = (Path(__file__).with_name("relay.py")).read_text(encoding="utf-8")
    return [relay_python(), "-I", "-S", "-c", source, PROXY_SOCKET, str(RELAY_PORT)]


def _system_view(programs: list[str] | None = None) -> list[str]:
    args = ["--size", str(_MB), "--tmpfs", "/"]
    if programs is not None:
        return [*args, *programs, *(a for p in EMPTY_DIRS for a in ("--dir", p))]
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in EMPTY_DIRS:
        args += ["--dir", path]
    return args


def bwrap_args(
    plan: MountPlan, argv: list[str], bwrap: str = "bwrap", setpriv: str = "setpriv"
) -> list[str]:
    """The full command line: bwrap, its options, then ``argv`` (behind setpriv as root)."""
    ws = str(plan.workspace)
    spaces = ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
    if plan.mode != "full-access" or plan.proxy_socket is not None:
        spaces.append("--unshare-net")
    guarded = plan.exec_guard is not None and plan.mode != "full-access"
    if plan.drop_to is None and guarded:
        spaces += ["--unshare-user", "--uid", "0", "--gid", "0"]
        spaces += [a for cap in UNPRIVILEGED_CAPS for a in ("--cap-add", cap)]
    elif plan.drop_to is None:
        spaces += ["--unshare-user", "--disable-userns"]
    if plan.mode == "full-access":
        args = [bwrap, "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *spaces]
    else:
        args = [bwrap, *_system_view(plan.programs), "--dev", "/dev", "--proc", "/proc", *spaces]
        args += ["--size", str(SHM_SIZE_MB * _MB), "--perms", "1777", "--tmpfs", "/dev/shm"]
        args += ["--remount-ro", "/dev"]
        args += ["--size", str(plan.tmp_size_mb * _MB), "--perms", "1777", "--tmpfs", "/tmp"]
        args += ["--symlink", "../tmp", "/var/tmp"]
    args += ["--ro-bind", "/proc/sys", "/proc/sys"]
    # The keys the inherited session keyring holds are listed there (seccomp refuses the
    # calls that read them).
    for listing in KEY_LISTS:
        if os.path.exists(listing):
            args += ["--ro-bind", "/dev/null", listing]
    for path in plan.read_only:  # before the hidden folders, which cover what is inside them
        args += [*_ancestors(path), "--ro-bind", str(path), str(path)]
    # Homes and clawloop's folders that are visible (under /opt, say, or in full-access).
    for path in plan.hidden:
        if not _inside(path, plan.workspace):
            args += ["--size", "4096", "--perms", "0555", "--tmpfs", str(path)]
    if plan.mode != "full-access":
        args += _ancestors(plan.workspace)
    args += _workspace(plan)
    for fd, path in plan.protected:
        if _shown(path, plan):
            args += ["--ro-bind-fd", str(fd), str(path)]
    for path in plan.covered:
        if _shown(path, plan):
            args += ["--ro-bind", "/dev/null", str(path)]
    for path in plan.hidden:
        if _inside(path, plan.workspace) and _shown(path, plan):
            args += ["--size", "4096", "--perms", "0555", "--tmpfs", str(path)]
    env = dict(plan.env)
    relay: CompiledRelay | None = None
    if plan.proxy_socket is not None:
        relay = compiled_relay()
        args += _proxy_mounts(plan.proxy_socket, relay)
        url = f"http://127.0.0.1:{RELAY_PORT}"
        env.update(dict.fromkeys(PROXY_VARIABLES, url), ALL_PROXY=url, no_proxy="", NO_PROXY="")
        argv = [*relay_argv(relay), *argv]
    guard: list[str] = []
    if guarded and plan.exec_guard is not None:
        folder = os.path.dirname(GUARD_BINARY)
        args += ["--perms", "0755", "--dir", folder]
        args += ["--ro-bind", str(plan.exec_guard.path), GUARD_BINARY]
        user = (os.getuid(), os.getgid()) if plan.drop_to is None else None
        keep = None
        if plan.programs is not None:
            keep = [*plan.keep_exec, *([RELAY_BINARY] if relay is not None else [])]
        guard = guard_argv(keep, plan.seccomp_fd, user, SCRATCH, plan.tmp_inodes)
    if plan.mode != "full-access":
        args += ["--remount-ro", "/"]
    if plan.seccomp_fd is not None and not guard:
        args += ["--seccomp", str(plan.seccomp_fd)]
    args += ["--die-with-parent", "--new-session", "--chdir", ws, "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    if plan.drop_to is None:
        return [*args, "--", *guard, *argv]
    uid, gid = plan.drop_to
    drop = [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
    drop += ["--inh-caps=-all", "--bounding-set=-all", "--"]
    return [*args, "--", *guard, *drop, *argv]


def passed_fds(args: list[str], plan: MountPlan) -> tuple[int, ...]:
    """The descriptors the command line ``args`` uses: those bubblewrap mounts from (it closes
    each after the mount) and the seccomp filter's. Nothing else may be passed: bubblewrap
    leaves other descriptors open, so the command would inherit them, and a descriptor of a
    host folder reaches everything under it past the view (``/proc/self/fd/N/secret``)."""
    used = set() if plan.seccomp_fd is None else {plan.seccomp_fd}
    end = args.index("--") if "--" in args else len(args)
    for i in range(end - 1):
        if args[i] in ("--bind-fd", "--ro-bind-fd"):
            used.add(int(args[i + 1]))
    return tuple(sorted(used))


def _workspace(plan: MountPlan) -> list[str]:
    """The workspace: whole (read-write or read-only), or an empty folder holding only the
    visible parts, read-only, and the writable parts over them."""
    ws = str(plan.workspace)
    if plan.visible is None:
        read_only = plan.mode == "read-only" or plan.writable is not None
        args = ["--ro-bind-fd" if read_only else "--bind-fd", str(plan.workspace_fd), ws]
    else:
        args = ["--perms", "0755", "--dir", ws]
        for fd, path in plan.visible:
            args += [*_parents(path, plan.workspace, []), "--ro-bind-fd", str(fd), str(path)]
    shown = [p for _, p in plan.visible or []]
    for fd, path in plan.writable or []:
        args += [*_parents(path, plan.workspace, shown), "--bind-fd", str(fd), str(path)]
    return args


def _parents(path: Path, workspace: Path, shown: list[Path]) -> list[str]:
    """The folders between the workspace and ``path``, made searchable in its empty stand-in
    (bwrap would make them private); none inside a part already shown, which has them."""
    args: list[str] = []
    for parent in reversed(path.parents):
        below = _inside(parent, workspace) and parent != workspace
        if below and not any(_inside(parent, part) for part in shown):
            args += ["--perms", "0755", "--dir", str(parent)]
    return args


def _shown(path: Path, plan: MountPlan) -> bool:
    """Whether ``path`` (in the workspace) is in the view: a part not shown stays absent,
    rather than appear as the mount point of what protects it."""
    if plan.visible is None or not _inside(path, plan.workspace):
        return True
    parts = [p for _, p in [*plan.visible, *(plan.writable or [])]]
    return any(_inside(path, part) for part in parts)


def _proxy_mounts(socket_path: Path, relay: CompiledRelay | None) -> list[str]:
    """The proxy's socket at :data:`PROXY_SOCKET`, in a folder any uid can search, and the
    compiled relay read-only beside it (its cache folder is hidden from the view)."""
    folder = os.path.dirname(PROXY_SOCKET)
    args = ["--perms", "0755", "--dir", folder, "--ro-bind", str(socket_path), PROXY_SOCKET]
    if relay is not None:
        args += ["--ro-bind", str(relay.path), RELAY_BINARY]
    return args


def _ancestors(workspace: Path) -> list[str]:
    """Create the folders above the workspace in the view, searchable (they are empty there)."""
    made = {"/", "/tmp", *EMPTY_DIRS}
    args: list[str] = []
    for parent in reversed(workspace.parents):
        if str(parent) in made or any(_inside(parent, Path(p)) for p in SYSTEM_PATHS):
            continue
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
