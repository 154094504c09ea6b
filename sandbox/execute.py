"""One prepared command line, run to its end: its output read as it comes and capped (the head
and tail are kept), a command that produces far more than it could ever show killed rather than
drained, and the whole process group killed at the timeout, past the disk budget, or within one
poll (50 ms) of the run being cancelled (``/stop`` in a chat, Ctrl-C at the terminal).

:mod:`sandbox.runner` builds the command line (bubblewrap's, or the bare one with the sandbox
off); this module only runs it.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from agent.errors import ToolError
from agent.run_context import current_run
from sandbox.settings import ResourceLimits

_MB = 1024 * 1024


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
    killed_for_disk: bool = False
    cancelled: bool = False  # killed because its run was stopped
    notes: list[str] = field(default_factory=list)  # what the sandbox refused or changed


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


def _disk_used(path: Path | None) -> tuple[int, int]:
    """Bytes and inodes in use on the file system holding ``path``."""
    if path is None:
        return 0, 0
    info = os.statvfs(path)
    return (info.f_blocks - info.f_bfree) * info.f_frsize, info.f_files - info.f_ffree


def execute(
    cmd: list[str],
    kwargs: dict[str, object],
    timeout: float,
    limits: ResourceLimits,
    workspace: Path | None,
) -> CommandResult:
    """Run ``cmd``; stop it at the timeout, the output cap, or the disk budget (if a workspace)."""
    keep, drain = limits.output_bytes, limits.drain_bytes
    budget = limits.disk_budget_mb * _MB
    run = current_run()
    cancel = run.cancel if run is not None else None
    if cancel is not None and cancel.is_set():
        raise ToolError("the command was not run: the user stopped the task")
    began = time.monotonic()
    disk_start = _disk_used(workspace)
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
    timed_out = killed_for_output = killed_for_disk = cancelled = False
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None  # PIPE was asked for
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    deadline = began + timeout
    exited_at: float | None = None
    next_disk_check = began + 0.05
    try:
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if cancel is not None and cancel.is_set():
                cancelled = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > 0.5:
                break  # a background child kept the pipe open after the command ended
            if workspace is not None and now >= next_disk_check:
                next_disk_check = now + 0.05
                # The file system's own count: fallocate, sparse tricks and many small files
                # all show up here.
                used, inodes = _disk_used(workspace)
                if used - disk_start[0] > budget or inodes - disk_start[1] > limits.inode_budget:
                    killed_for_disk = True
                    break
            for key, _ in sel.select(timeout=min(0.05, deadline - now)):
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
    killed = timed_out or killed_for_output or killed_for_disk or cancelled
    truncated = out.total > keep // 2 * 2 or err.total > keep // 2 * 2 or killed_for_output
    result = CommandResult(
        None if killed else code,
        out.text(),
        err.text(),
        time.monotonic() - began,
        timed_out,
        truncated,
        killed_for_output,
        killed_for_disk,
        cancelled,
    )
    if cancelled:
        result.notes.append("the command was stopped: the user stopped the task")
    if killed_for_disk:
        result.notes.append(
            f"the command was stopped: it took more than the disk budget of "
            f"{limits.disk_budget_mb} MB or {limits.inode_budget} files "
            "(sandbox.limits.disk_budget_mb, inode_budget)"
        )
    return result


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the process group; for bwrap that takes its whole pid namespace with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
