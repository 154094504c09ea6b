"""Resolving a path the model gave strictly inside the workspace, and the paths never written.

Refused: ``..`` or absolute paths that leave the workspace, symbolic links anywhere along the
way that point out of it, and files with more than one hard link (the other name may be
outside). Some paths stay write-protected even inside the workspace, because writing them is a
way to run code later outside the sandbox: git hooks and config, shell start-up files, and
clawloop's own config and data folders.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from agent.errors import ToolError

SHELL_RC_FILES = frozenset(
    {
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".zlogin",
        ".zlogout",
        ".cshrc",
        ".tcshrc",
        ".login",
        ".kshrc",
        ".inputrc",
    }
)
GIT_PROTECTED = (".git/hooks", ".git/config")


def clawloop_dirs() -> list[Path]:
    """clawloop's own config and data folders (platformdirs)."""
    import platformdirs

    return [
        Path(platformdirs.user_config_dir("clawloop")),
        Path(platformdirs.user_data_dir("clawloop")),
    ]


@dataclass(slots=True)
class PathResolver:
    """Turns the model's path arguments into real paths inside ``workspace``, or refuses."""

    workspace: Path
    protected_dirs: list[Path] = field(default_factory=clawloop_dirs)

    def __post_init__(self) -> None:
        self.workspace = self.workspace.resolve()

    def resolve(self, path: str, *, for_write: bool = False) -> Path:
        """The resolved path; raise :class:`ToolError` if it leaves the workspace."""
        if not path or "\x00" in path:
            raise ToolError("the path is empty or contains a NUL byte")
        raw = Path(os.path.expanduser(path)) if path.startswith("~") else Path(path)
        full = raw if raw.is_absolute() else self.workspace / raw
        resolved = full.resolve()
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
        if for_write:
            self.check_writable(resolved, path)
        return resolved

    def open(
        self, resolved: Path, flags: int, mode: int = 0o666, make_parents: bool = False
    ) -> int:
        """Open a resolved path by walking from the workspace without following any link.

        A link swapped in after :meth:`resolve` (by a sandboxed command, say) makes this fail
        instead of reaching outside. Files with several hard links are refused here too.
        """
        parts = resolved.relative_to(self.workspace).parts
        if not parts:
            raise ToolError("that is the workspace folder itself, not a file")
        nofollow = os.O_NOFOLLOW | os.O_CLOEXEC
        dirfd = os.open(self.workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
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
                fd = os.open(parts[-1], flags | nofollow, mode, dir_fd=dirfd)
            except OSError as exc:
                raise ToolError(f"cannot open {self.relative(resolved)!r}: {exc.strerror}") from exc
        finally:
            os.close(dirfd)
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            os.close(fd)
            raise ToolError(
                f"{self.relative(resolved)!r} has other hard links, which may lie "
                "outside the workspace; refusing to touch it"
            )
        return fd

    def relative(self, resolved: Path) -> str:
        """The workspace-relative form of a resolved path."""
        rel = resolved.relative_to(self.workspace).as_posix()
        return rel or "."

    def check_writable(self, resolved: Path, shown: str) -> None:
        """Raise :class:`ToolError` for the always-protected paths."""
        rel = resolved.relative_to(self.workspace)
        parts = rel.parts
        if resolved.name in SHELL_RC_FILES:
            raise ToolError(f"{shown!r} is a shell start-up file; it is write-protected")
        for protected in GIT_PROTECTED:
            p = Path(protected).parts
            # .git/hooks anywhere (submodules too), .git/config exactly
            for i in range(len(parts) - len(p) + 1):
                if parts[i : i + len(p)] == p:
                    raise ToolError(
                        f"{shown!r} is under {protected}, which is write-protected "
                        "(it can run code outside the sandbox)"
                    )
        for folder in self.protected_dirs:
            if _inside(resolved, folder.resolve()):
                raise ToolError(f"{shown!r} is in clawloop's own folder {folder}; write-protected")


def protected_paths(workspace: Path, extra: list[Path] | None = None) -> list[Path]:
    """Existing paths inside ``workspace`` the OS sandbox mounts read-only."""
    ws = workspace.resolve()
    git = ws / ".git"
    if _plain(git) and git.is_dir() and not os.path.lexists(git / "hooks"):
        # Otherwise a command could create .git/hooks and plant a hook; git makes it anyway.
        (git / "hooks").mkdir()
    found: list[Path] = []
    for rel in GIT_PROTECTED:
        found.append(ws / rel)
    found += [ws / name for name in SHELL_RC_FILES]
    found += [d for d in (extra if extra is not None else clawloop_dirs()) if _inside(d, ws)]
    return [p for p in found if _plain(p)]


def _plain(path: Path) -> bool:
    """Exists and is a real file or folder (a symbolic link is refused later anyway)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
