"""Running one command: in bubblewrap (or, if the user said ``--sandbox off``, directly).

Output is read as it comes and capped (the head and tail are kept); a command that produces
far more than it could ever show is killed rather than drained. On timeout the whole tree is
killed: bwrap's own pid namespace dies with it, whatever the command forked or ``setsid``-ed.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from agent.errors import ToolError, UserError
from sandbox.bwrap import SAFE_PATH, MountPlan, bwrap_args, bwrap_path, grant_workspace
from sandbox.limits import prlimit_argv, setpriv_argv
from sandbox.paths import protected_paths
from sandbox.secrets import is_secret_name
from sandbox.settings import SandboxSettings


@dataclass(slots=True)
class CommandResult:
    """What a command did."""

    exit_code: int | None  # None when it was killed
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    truncated: bool = False  # some output was cut
    killed_for_output: bool = False


class CommandRunner(Protocol):
    """Runs argv in the workspace under the sandbox settings; the one way skills run programs."""

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> CommandResult:
        """Run to completion, the timeout, or the output cap."""
        ...

    def check(self) -> None:
        """Raise :class:`UserError` (with the fix) if commands cannot be run at all."""
        ...


@dataclass(slots=True)
class _Capture:
    """Keeps the first and last ``keep // 2`` bytes of a stream and counts the rest."""

    keep: int
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.keep // 2 - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            del self.tail[: max(0, len(self.tail) - self.keep // 2)]

    def text(self) -> str:
        cut = self.total - len(self.head) - len(self.tail)
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if cut <= 0:
            return head + tail
        return f"{head}\n[... output truncated: {cut} bytes cut, {self.total} in all ...]\n{tail}"


class SandboxRunner:
    """Runs commands for one workspace, under ``settings`` (backend "bwrap" or "off")."""

    def __init__(
        self, settings: SandboxSettings, workspace: Path, environ: Mapping[str, str] | None = None
    ) -> None:
        self.settings = settings
        self.workspace = workspace.resolve()
        self.environ = dict(os.environ if environ is None else environ)
        self._checked = False

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
        for name in self.settings.env_allowlist:
            if name in self.environ and not is_secret_name(name) and name not in ("PATH", "HOME"):
                env[name] = self.environ[name]
        return env

    def check(self) -> None:
        """Make sure the sandbox can start; :class:`UserError` with the fix if it cannot."""
        if self._checked or not self.sandboxed:
            return
        result = self._run(["true"], timeout=30)
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

    def _run(self, argv: list[str], *, timeout: float | None) -> CommandResult:
        limits = self.settings.limits
        timeout = limits.timeout_s if timeout is None else min(timeout, limits.timeout_s)
        fds: list[int] = []
        try:
            cmd, kwargs = self._command(argv, fds)
            return _execute(cmd, kwargs, timeout, limits.output_bytes, limits.drain_bytes)
        finally:
            for fd in fds:
                os.close(fd)

    def _command(self, argv: list[str], fds: list[int]) -> tuple[list[str], dict[str, object]]:
        root = os.geteuid() == 0
        uid = self.settings.sandbox_uid if root else os.geteuid()
        kwargs: dict[str, object] = {"cwd": str(self.workspace)}
        if not self.sandboxed:
            kwargs["env"] = self.env()
            return [*prlimit_argv(self.settings.limits, uid), *argv], kwargs
        bwrap = bwrap_path()
        prefix = prlimit_argv(self.settings.limits, uid)
        if root:
            write = self.settings.mode != "read-only"
            grant_workspace(self.workspace, uid, write)
            prefix = [*setpriv_argv(uid), *prefix]
        fds.append(os.open(self.workspace, os.O_PATH | os.O_DIRECTORY))
        protected = []
        for path in protected_paths(self.workspace):
            fd = os.open(path, os.O_PATH | os.O_NOFOLLOW)
            fds.append(fd)
            protected.append((fd, path))
        plan = MountPlan(
            self.workspace,
            fds[0],
            protected,
            self.settings.mode,
            self.env(),
            self.settings.limits.tmp_size_mb,
        )
        kwargs["pass_fds"] = tuple(fds)
        kwargs["env"] = {"PATH": SAFE_PATH}
        return [*prefix, *bwrap_args(plan, argv, bwrap)], kwargs


def _execute(
    cmd: list[str], kwargs: dict[str, object], timeout: float, keep: int, drain: int
) -> CommandResult:
    began = time.monotonic()
    try:
        proc = subprocess.Popen(  # type: ignore[call-overload]
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            **kwargs,
        )
    except FileNotFoundError as exc:
        raise ToolError(f"command not found: {cmd[0]}") from exc
    except PermissionError as exc:
        raise ToolError(f"cannot run {cmd[0]}: permission denied") from exc
    out, err = _Capture(keep), _Capture(keep)
    timed_out = killed_for_output = False
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None  # PIPE was asked for
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    deadline = began + timeout
    exited_at: float | None = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > 0.5:
                break  # a background child kept the pipe open after the command ended
            for key, _ in sel.select(timeout=min(0.1, deadline - now)):
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                key.data.add(data)
            if out.total + err.total > drain:
                killed_for_output = True
                break
    finally:
        sel.close()
        _kill_group(proc)
        proc.stdout.close()
        proc.stderr.close()
    code = proc.wait()
    exit_code = None if (timed_out or killed_for_output) else code
    truncated = out.total > keep // 2 * 2 or err.total > keep // 2 * 2 or killed_for_output
    return CommandResult(
        exit_code,
        out.text(),
        err.text(),
        time.monotonic() - began,
        timed_out,
        truncated,
        killed_for_output,
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the process group; for bwrap that takes its whole pid namespace with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
