"""Resolving a path the model gave strictly inside the workspace, and the paths never written.

Refused: ``..`` or absolute paths that leave the workspace, symbolic links anywhere along the
way that point out of it, and files with more than one hard link (the other name may be
outside). The rule is the shell's: what a sandboxed command cannot see (clawloop's own config,
data and cache folders, the user's home) cannot be read either, and what it sees read-only is
never written: anything under a ``.git`` at any depth (or a new ``.git``), shell start-up
files, the tool files of :data:`sandbox.scan.TOOL_FILES`, and anything in a virtual
environment or ``node_modules`` folder (a ``.pth`` file there runs at the next start of that
Python), clawloop's own installation included.

Opening is done component by component with ``O_NOFOLLOW`` and ``O_NONBLOCK``, and the opened
descriptor is checked (a regular file, one link, on the workspace's file system) before
anything is truncated or read: a FIFO or device never blocks a call, and a name swapped for a
link in between is caught on the descriptor itself.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from agent.errors import ToolError
from agent.host import cache_root
from sandbox.scan import ENV_MARKERS, PACKAGE_FOLDERS, SHELL_RC_FILES, TOOL_FILES

GIT_NAME = ".git"


def clawloop_dirs() -> list[Path]:
    """clawloop's own config, data and cache folders (platformdirs, and ``$CLAWLOOP_CACHE_DIR``).

    The cache holds the engine's weights and KV blocks on disk: a command that rewrote them
    would change what the model reads without changing a token of its prompt.
    """
    import platformdirs

    dirs = [
        Path(platformdirs.user_config_dir("clawloop")),
        Path(platformdirs.user_data_dir("clawloop")),
        Path(platformdirs.user_cache_dir("clawloop")),
    ]
    cache = cache_root()  # where the caches go when $CLAWLOOP_CACHE_DIR moves them
    return dirs if cache in dirs else [*dirs, cache]


@dataclass(slots=True)
class PathResolver:
    """Turns the model's path arguments into real paths inside ``workspace``, or refuses."""

    workspace: Path
    protected_dirs: list[Path] = field(default_factory=clawloop_dirs)  # neither read nor written
    read_only: list[Path] = field(default_factory=list)  # never written
    _hidden: list[Path] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self.workspace = self.workspace.resolve()
        real = [Path(os.path.realpath(p)) for p in self.protected_dirs]
        # A folder that holds the workspace is not hidden inside it (it could not be).
        self._hidden = [p for p in real if not _inside(self.workspace, p)]

    def resolve(self, path: str, *, for_write: bool = False) -> Path:
        """The resolved path; raise :class:`ToolError` if it leaves the workspace."""
        if not path or "\x00" in path:
            raise ToolError("the path is empty or contains a NUL byte")
        raw = Path(os.path.expanduser(path)) if path.startswith("~") else Path(path)
        full = raw if raw.is_absolute() else self.workspace / raw
        resolved = Path(os.path.realpath(full))  # a link loop stays a (missing) path
        if not _inside(resolved, self.workspace):
            raise ToolError(
                f"{path!r} is outside the workspace ({self.workspace}); use a path inside it"
                + (
                    " (a symbolic link on the way points out)"
                    if _inside(Path(os.path.normpath(full)), self.workspace)
                    else ""
                )
            )
        if resolved.exists() and resolved.is_file() and resolved.stat().st_nlink > 1:
            raise ToolError(
                f"{path!r} has other hard links, which may lie outside the workspace; "
                "refusing to touch it"
            )
        self._check_visible(resolved, path)
        if for_write:
            self.check_writable(resolved, path)
        return resolved

    def hidden(self, resolved: Path) -> Path | None:
        """The hidden folder (or file) ``resolved`` lies in, if any: sandboxed commands do not
        see it, so neither do the files tools."""
        text = str(resolved)
        for folder in self._hidden:
            top = str(folder)
            if text == top or text.startswith(top.rstrip("/") + "/"):
                return folder
        return None

    def _check_visible(self, resolved: Path, shown: str) -> None:
        folder = self.hidden(resolved)
        if folder is not None:
            raise ToolError(
                f"{shown!r} is hidden from the sandbox ({folder} is clawloop's own or your "
                "home folder); the files tools do not show it either"
            )

    def open(
        self, resolved: Path, flags: int, mode: int = 0o666, make_parents: bool = False
    ) -> int:
        """Open a resolved regular file by walking from the workspace without following links.

        A link swapped in after :meth:`resolve` (by a sandboxed command, say) makes this fail
        instead of reaching outside. ``O_TRUNC`` is applied only after the descriptor passed
        its checks: a regular file, one hard link, on the workspace's own file system.
        """
        parts = resolved.relative_to(self.workspace).parts
        if not parts:
            raise ToolError("that is the workspace folder itself, not a file")
        self._check_visible(resolved, self.relative(resolved))
        nofollow = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        dirfd = os.open(self.workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        device = os.fstat(dirfd).st_dev
        try:
            for name in parts[:-1]:
                if make_parents:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, dir_fd=dirfd)
                try:
                    nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY | nofollow, dir_fd=dirfd)
                except (NotADirectoryError, OSError) as exc:
                    raise ToolError(
                        f"cannot open {self.relative(resolved)!r}: {exc.strerror}"
                    ) from exc
                os.close(dirfd)
                dirfd = nxt
            try:
                fd = os.open(parts[-1], (flags & ~os.O_TRUNC) | nofollow, mode, dir_fd=dirfd)
            except OSError as exc:
                raise ToolError(f"cannot open {self.relative(resolved)!r}: {exc.strerror}") from exc
            try:
                self._check_descriptor(fd, resolved, device)
                self._check_name_still_names(fd, dirfd, parts[-1], resolved)
                if flags & os.O_TRUNC:
                    os.ftruncate(fd, 0)
            except BaseException:
                os.close(fd)
                raise
        finally:
            os.close(dirfd)
        return fd

    def _check_name_still_names(self, fd: int, dirfd: int, name: str, resolved: Path) -> None:
        """Refuse unless the name still points at the opened file, and it has one link.

        The descriptor's own link count is not enough: a hard link to an outside file can be
        opened and then unlinked from the workspace before the count is read, leaving a count
        of one that is the outside name. Looking the name up again after that read closes the
        gap: the name is gone, points elsewhere, or shows the second link again.
        """
        opened = os.fstat(fd)
        try:
            named = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        except OSError as exc:
            raise ToolError(
                f"{self.relative(resolved)!r} changed while it was being opened; try again"
            ) from exc
        if (named.st_dev, named.st_ino) != (opened.st_dev, opened.st_ino) or named.st_nlink > 1:
            raise ToolError(
                f"{self.relative(resolved)!r} changed while it was being opened "
                "(another name or hard link took its place); refused"
            )

    def _check_descriptor(self, fd: int, resolved: Path, device: int) -> None:
        info = os.fstat(fd)
        shown = self.relative(resolved)
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{shown!r} is not a regular file (a FIFO, socket or device); refused")
        if info.st_nlink > 1:
            raise ToolError(
                f"{shown!r} has other hard links, which may lie outside the workspace; "
                "refusing to touch it"
            )
        if info.st_dev != device:
            raise ToolError(f"{shown!r} is on another file system than the workspace; refused")

    def relative(self, resolved: Path) -> str:
        """The workspace-relative form of a resolved path."""
        rel = resolved.relative_to(self.workspace).as_posix()
        return rel or "."

    def check_writable(self, resolved: Path, shown: str) -> None:
        """Raise :class:`ToolError` for the always-protected paths."""
        parts = resolved.relative_to(self.workspace).parts
        if resolved.name in SHELL_RC_FILES:
            raise ToolError(f"{shown!r} is a shell start-up file; it is write-protected")
        if GIT_NAME in parts:
            raise ToolError(
                f"{shown!r} is git metadata (.git), which is write-protected: it can run "
                "programs outside the sandbox"
            )
        for folder in self.protected_dirs:
            if _inside(resolved, folder.resolve()):
                raise ToolError(f"{shown!r} is in clawloop's own folder {folder}; write-protected")
        tool = next((p for p in parts if p in TOOL_FILES or p in PACKAGE_FOLDERS), None)
        if tool is not None:
            raise ToolError(
                f"{shown!r} is under {tool}, which a host tool runs programs from; "
                "write-protected (the user can change it outside)"
            )
        environment = self._environment(resolved)
        if environment is not None:
            raise ToolError(
                f"{shown!r} is in the environment {self.relative(environment)}, whose files run "
                "when its programs start; write-protected (the user can change it outside)"
            )

    def _environment(self, resolved: Path) -> Path | None:
        """The virtual environment (or clawloop's read-only installation) holding ``resolved``."""
        for folder in [*reversed(resolved.parents), resolved]:
            if folder == self.workspace or not _inside(folder, self.workspace):
                continue
            if folder in self.read_only or any(os.path.lexists(folder / m) for m in ENV_MARKERS):
                return folder
        return None


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
