"""Running one command: in bubblewrap (or, if the user said ``--sandbox off``, directly).

The runner decides what the command sees (the mounts, the programs, the network, the user it
runs as) and builds its command line; :mod:`sandbox.execute` runs that line, capping its output
and killing the whole tree on timeout or cancel: bwrap's own pid namespace dies with it,
whatever the command forked or ``setsid``-ed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import stat
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agent.errors import ToolError, UserError
from sandbox.bwrap import (
    SAFE_PATH,
    SYSTEM_PATHS,
    MountPlan,
    bwrap_args,
    bwrap_path,
    passed_fds,
    relay_python,
)
from sandbox.cgroup import Cgroup, create, find_place
from sandbox.egress import EgressProxy, parse_host
from sandbox.exec_guard import compiled_guard
from sandbox.execute import CommandResult, execute
from sandbox.grant import Identity, grant, identity_for, revoke
from sandbox.limits import prlimit_argv, setpriv_argv, ulimit_script
from sandbox.programs import LAUNCH_SHELLS, ProgramView, linked_libraries, program_view
from sandbox.relay_build import compiled_relay
from sandbox.scan import Scan, refuse_new, scan
from sandbox.seccomp import filter_fd
from sandbox.secrets import is_secret_name
from sandbox.settings import SandboxSettings
from sandbox.writable import make_folders, open_parts, writable_parts

_log = logging.getLogger("clawloop.sandbox")
_MB = 1024 * 1024


class CommandRunner(Protocol):
    """Runs argv in the workspace under the sandbox settings; the one way skills run programs."""

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> CommandResult:
        """Run to completion, the timeout, or the output cap."""
        ...

    def check(self) -> None:
        """Raise :class:`UserError` (with the fix) if commands cannot be run at all."""
        ...


@dataclass(frozen=True, slots=True)
class Grant:
    """What a skill's commands are granted beyond the sandbox mode, as its manifest declares
    it: hosts to reach, workspace globs to write and to read, and the programs in the view.
    ``None`` for a glob or program list means no such restriction; the default grants nothing
    beyond the mode."""

    network: Sequence[str] = ()
    write_paths: Sequence[str] | None = None
    read_paths: Sequence[str] | None = None
    programs: Sequence[str] | None = None


class SandboxRunner:
    """Runs commands for one workspace, under ``settings`` (backend "bwrap" or "off").

    ``hidden`` are clawloop's own folders and files (config, data, audit log, traces): a
    sandboxed command never sees them, wherever they are. ``network`` are the only hosts a
    command may reach (through :mod:`sandbox.egress`; none: no network, as the mode says);
    ``write_paths``, when given, the only workspace globs it may write (:mod:`sandbox.writable`).
    ``read_only`` are folders in the workspace mounted read-only whatever the walk finds
    (clawloop's own installation, when it lies there). ``programs``, when given, are the only
    executables in the view (:mod:`sandbox.programs`); ``read_paths`` the only workspace globs
    it shows, besides the writable ones: everything else of it is absent. The last four come
    together as a :class:`Grant`, what a skill's manifest declares.
    """

    def __init__(
        self,
        settings: SandboxSettings,
        workspace: Path,
        environ: Mapping[str, str] | None = None,
        hidden: Sequence[Path] = (),
        *,
        read_only: Sequence[Path] = (),
        grant: Grant = Grant(),
    ) -> None:
        self.settings = settings
        self.programs = None if grant.programs is None else list(grant.programs)
        self.read_paths = None if grant.read_paths is None else list(grant.read_paths)
        self.read_only = [Path(p) for p in read_only]
        self.network = [parse_host(h) for h in grant.network]
        self.write_paths = None if grant.write_paths is None else list(grant.write_paths)
        self.workspace = workspace.resolve()
        self.environ = dict(os.environ if environ is None else environ)
        self.hidden = [Path(p) for p in hidden]
        self._checked = False
        self._cgroups = find_place() if self.sandboxed else None
        self._group: Cgroup | None = None

    @property
    def sandboxed(self) -> bool:
        return self.settings.backend != "off"

    def env(self) -> dict[str, str]:
        """The command's whole environment: a fixed PATH and HOME plus the allowlist, no secrets."""
        env = {
            "PATH": SAFE_PATH,
            "HOME": "/tmp" if self.sandboxed else str(self.workspace),
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
        }
        if self.sandboxed:
            # The workspace may belong to another uid than the command's; inside the sandbox
            # every .git is read-only, which is what safe.directory protects against.
            env.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="safe.directory")
            env["GIT_CONFIG_VALUE_0"] = "*"
        for name in self.settings.env_allowlist:
            if name in self.environ and not is_secret_name(name) and name not in ("PATH", "HOME"):
                env[name] = self.environ[name]
        return env

    def check(self) -> None:
        """Make sure the sandbox can start; :class:`UserError` with the fix if it cannot."""
        if self._checked or not self.sandboxed:
            return
        # A shell builtin: it starts in any view, the one holding only declared programs too.
        result = self._run(["sh", "-c", "exit 0"], timeout=30, touches_files=False)
        if result.exit_code != 0:
            first = (result.stderr.strip().splitlines() or ["no error message"])[0]
            raise UserError(
                f"the bubblewrap sandbox could not start ({first}); check that user "
                "namespaces are enabled, or run with `--sandbox off`"
            )
        self._checked = True

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> CommandResult:
        if self.sandboxed and not self._checked:
            try:
                self.check()
            except UserError as exc:
                raise ToolError(f"the command was not run: {exc.message}. Tell the user.") from exc
        return self._run(list(argv), timeout=timeout)

    def _run(
        self, argv: list[str], *, timeout: float | None, touches_files: bool = True
    ) -> CommandResult:
        limits = self.settings.limits
        timeout = limits.timeout_s if timeout is None else min(timeout, limits.timeout_s)
        if not self.sandboxed:
            uid = os.geteuid()
            cmd = [*prlimit_argv(limits, uid), *argv]
            kwargs: dict[str, object] = {"cwd": str(self.workspace), "env": self.env()}
            return execute(cmd, kwargs, timeout, limits, None)
        before = scan(self.workspace)
        fds: list[int] = []
        notes: list[str] = []
        identity: Identity | None = None
        proxy = EgressProxy(self.network) if self.network else None
        try:
            if self.write_paths is not None and self.settings.mode == "workspace-write":
                make_folders(self.workspace, writable_parts(self.workspace, self.write_paths))
            if proxy is not None:
                proxy.start()
            if os.geteuid() == 0:
                identity = identity_for(self.workspace, self.settings.sandbox_uid)
                if identity.needs_grant:
                    write = self.settings.mode != "read-only"
                    given = grant(self.workspace, identity.uid, write, whole=touches_files)
                    if given.skipped_links:
                        notes.append(_links_note(given.skipped_links))
            group = self._cgroup()
            cmd, kwargs = self._command(argv, fds, before, identity, proxy)
            uid = identity.uid if identity is not None else os.geteuid()
            cmd = group.wrap(cmd, ulimit_script(limits, uid))
            result = execute(cmd, kwargs, timeout, limits, self.workspace)
        finally:
            if proxy is not None:
                proxy.stop()
                notes += proxy.notes()
            for fd in fds:
                os.close(fd)
            if identity is not None and identity.needs_grant:
                revoke(self.workspace, identity.uid, whole=touches_files)
        for refusal in refuse_new(before, scan(self.workspace), self.workspace):
            notes.append(refusal.message(self.workspace))
            _log.warning("sandbox: %s", refusal.message(self.workspace))
        result.notes += notes
        return result

    def cgroup(self) -> Cgroup:
        """This runner's cgroup (a long-running server joins it too: :mod:`sandbox.service`)."""
        return self._cgroup()

    def _cgroup(self) -> Cgroup:
        """This runner's cgroup, made on first use and removed when the runner goes.

        One per runner rather than per command: creating and removing a memory cgroup costs
        tens of milliseconds. Commands of one runner run one at a time in the agent loop; any
        that overlap share the limit, which only makes it stricter.
        """
        if self._group is None:
            self._group = Cgroup()
            if self._cgroups is not None and self._cgroups.usable:
                limits = self.settings.limits
                self._group = create(self._cgroups, limits.memory_mb * _MB, limits.processes)
                weakref.finalize(self, self._group.remove)
        return self._group

    def _command(
        self,
        argv: list[str],
        fds: list[int],
        found: Scan,
        identity: Identity | None,
        proxy: EgressProxy | None = None,
    ) -> tuple[list[str], dict[str, object]]:
        bwrap = bwrap_path()
        fds.append(os.open(self.workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
        plan = MountPlan(
            self.workspace, fds[0], self.settings.mode, self.env(), self.settings.limits.tmp_size_mb
        )
        full = self.settings.mode == "full-access"
        # Git metadata outside the workspace is only in the view in full-access mode.
        outside = sorted(found.outside_git) if full else []
        environments = [*sorted(found.environments), *self.read_only]
        for path in [*sorted(found.git), *outside, *sorted(found.rc_files), *environments]:
            opened = _open_plain(path)
            if opened is not None:
                fds.append(opened)
                plan.protected.append((opened, path))
        plan.covered += sorted(found.sockets)
        for path in self._hidden():
            (plan.hidden if path.is_dir() else plan.covered).append(path)
        if identity is not None:
            plan.drop_to = (identity.uid, identity.gid)
        if self.write_paths is not None and self.settings.mode == "workspace-write":
            plan.writable = self._writable(fds)
        if self.read_paths is not None:
            plan.visible = self._visible(fds, self.read_paths)
        plan.exec_guard = compiled_guard()
        plan.tmp_inodes = self.settings.limits.tmp_inodes
        if self.programs is not None:
            view = self._program_view(argv, identity, proxy is not None)
            if plan.exec_guard is not None and not plan.exec_guard.static:
                view.add(linked_libraries(str(plan.exec_guard.path)))
            plan.programs = view.bwrap_args()
            plan.keep_exec = view.executable_mounts()
        if proxy is not None:
            plan.proxy_socket = proxy.socket_path
        # A program view also refuses memfd_create: code in memory is on no noexec mount.
        plan.seccomp_fd = filter_fd(program_view=self.programs is not None)
        if plan.seccomp_fd is not None:
            fds.append(plan.seccomp_fd)
        setpriv = setpriv_argv(0)[0]
        args = bwrap_args(plan, argv, bwrap, setpriv)
        kwargs: dict[str, object] = {
            "cwd": "/",
            "pass_fds": passed_fds(args, plan),  # never one of a part the view leaves out
            "env": {"PATH": SAFE_PATH},
        }
        return args, kwargs

    def _writable(self, fds: list[int]) -> list[tuple[int, Path]] | None:
        """The declared writable parts, opened beneath the workspace (None: all of it)."""
        parts = writable_parts(self.workspace, self.write_paths or [])
        if parts.whole:
            return None
        opened = open_parts(self.workspace, fds[0], parts)
        fds += [fd for fd, _ in opened]
        return opened

    def _visible(self, fds: list[int], reads: list[str]) -> list[tuple[int, Path]] | None:
        """The parts of the workspace a command may read, opened beneath it (None: all)."""
        writes = self.write_paths
        if writes is None:
            writes = ["**"] if self.settings.mode == "workspace-write" else []
        parts = writable_parts(self.workspace, [*reads, *writes])
        if parts.whole:
            return None
        opened = open_parts(self.workspace, fds[0], parts)
        fds += [fd for fd, _ in opened]
        return opened

    def _program_view(self, argv: list[str], identity: Identity | None, proxy: bool) -> ProgramView:
        """A view holding only the declared programs, and those the sandbox itself starts the
        command with: its shell, ``setpriv`` as root, the network relay."""
        names = list(self.programs or [])
        if argv and os.path.basename(argv[0]) in LAUNCH_SHELLS:
            names.append(argv[0])
        if identity is not None:
            names.append(setpriv_argv(0)[0])
        relay = compiled_relay() if proxy else None
        if proxy and relay is None:
            names.append(relay_python())
        view = program_view(names)
        if relay is not None and not relay.static:  # the file itself is bound apart
            view.add(linked_libraries(str(relay.path)))
        return view

    def _hidden(self) -> list[Path]:
        """clawloop's folders and the user's homes that the view would otherwise show."""
        found = []
        full = self.settings.mode == "full-access"
        for path in [*self.hidden, *home_folders(self.environ)]:
            path = Path(os.path.abspath(path))
            if not os.path.lexists(path) or os.path.islink(path):
                continue
            if path == self.workspace or (_inside(self.workspace, path) and not full):
                continue  # the workspace is mounted over it anyway
            if full or _inside(path, self.workspace) or _under_system(path):
                found.append(path)
        return found


def home_folders(environ: Mapping[str, str]) -> list[Path]:
    """The invoking user's home, whatever its path: $HOME, the password entry, sudo's user."""
    homes = {environ.get("HOME", "")}
    for uid in {os.getuid(), os.geteuid()}:
        with contextlib.suppress(KeyError):
            homes.add(pwd.getpwuid(uid).pw_dir)
    if environ.get("SUDO_USER"):
        with contextlib.suppress(KeyError):
            homes.add(pwd.getpwnam(environ["SUDO_USER"]).pw_dir)
    return [Path(h) for h in homes if h and h != "/" and os.path.isabs(h)]


def _under_system(path: Path) -> bool:
    return any(_inside(path, Path(p)) for p in SYSTEM_PATHS)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _open_plain(path: Path) -> int | None:
    """An O_PATH descriptor of a real file or folder (not a link) to mount read-only over."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return fd
    os.close(fd)  # a link: renaming it is caught afterwards, its target is protected itself
    return None


def _links_note(names: list[str]) -> str:
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (
        f"not writable in the sandbox: {shown} (each has other hard links, which may lie "
        "outside the workspace)"
    )
