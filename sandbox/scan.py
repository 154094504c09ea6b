"""What in the workspace must not be written from the sandbox, found afresh before each command.

Writing git metadata or a shell start-up file is a way to run code later, outside the
sandbox: the next ``git status`` on the host runs ``core.fsmonitor``, the next shell reads
``.bashrc``. So before each command the workspace is walked once for every ``.git`` (folder or
gitdir file, at any depth), the folders a ``.git`` file points to and the ``core.hooksPath``
folders inside the workspace; each is mounted read-only (a mount point cannot be renamed).
Unix sockets a host program left in the workspace are covered so they cannot be reached.

What did not exist cannot be mounted over, so after the command the walk runs again: a ``.git``
or start-up file that appeared is moved out of the way (renamed ``NAME.clawloop-refused``), its
config checked for keys that run programs, and the user told.

The same holds for what an interpreter or a host tool runs on its own: a ``.pth`` file or
``sitecustomize.py`` in a virtual environment runs at the next start of its Python, a shim in
``node_modules/.bin`` (or the package file it links to) at the next ``npx``, an ``.envrc`` at
the next ``cd`` with direnv, a ``.vscode`` task when the folder is opened, an ``.npmrc`` or
``.yarnrc`` names programs the next ``npm``/``yarn`` runs. Every virtual environment (a folder
holding ``pyvenv.cfg`` or ``conda-meta``) and every ``node_modules`` folder is mounted
read-only as a whole; one a command makes is allowed (it is the command's own) and is
read-only from the next command on, and one put in place of a protected one (by renaming the
folder above it) is refused like a new ``.git``. The tool files are handled like start-up
files, at any depth.

The walk and every read go through :mod:`sandbox.safewalk`: a FIFO named ``.git/config``
cannot block it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.safewalk import Walk, kind_of, read_text

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
        ".gitconfig",
    }
)
# Files and folders a host tool reads and acts on by itself when it runs in (or opens) the
# folder that holds them, at any depth: direnv, VS Code tasks and settings, npm and yarn.
TOOL_FILES = frozenset({".envrc", ".vscode", ".npmrc", ".yarnrc", ".yarnrc.yml"})
# A folder holding one of these is a Python environment: its start-up files run at every start.
ENV_MARKERS = ("pyvenv.cfg", "conda-meta")
PACKAGE_FOLDERS = frozenset({"node_modules"})
REFUSED_SUFFIX = ".clawloop-refused"
# Keys in a git config that make git run a program.
_RUNS_PROGRAMS = re.compile(
    r"^(core\.(fsmonitor|hookspath|sshcommand|pager|editor|askpass|gitproxy)|"
    r"filter\..*\.(clean|smudge|process)|diff\.external|diff\..*\.(command|textconv)|"
    r"merge\..*\.driver|credential\.helper|sequence\.editor|pager\..*|"
    r"gpg\.program|gpg\..*\.program|uploadpack\.packobjectshook|include\.path|includeif\..*)$"
)
MAX_ENTRIES = 200_000  # a walk larger than this stops; what was found so far is protected
MAX_CONFIG_BYTES = 1_000_000


@dataclass(slots=True)
class Scan:
    """Protected paths inside the workspace at one moment."""

    git: set[Path] = field(default_factory=set)  # .git entries, gitdir targets, hooks paths
    outside_git: set[Path] = field(default_factory=set)  # gitdir targets outside the workspace
    inodes: set[tuple[int, int]] = field(default_factory=set)  # (device, inode) of each of them
    sockets: set[Path] = field(default_factory=set)
    rc_files: set[Path] = field(default_factory=set)  # start-up files, tool files
    # Virtual environments and package folders: read-only, by path -> (device, inode).
    environments: dict[Path, tuple[int, int]] = field(default_factory=dict)
    complete: bool = True


@dataclass(slots=True)
class Refusal:
    """Something a command created that could run code later, and what was done about it."""

    path: Path
    moved_to: Path | None
    dangerous_keys: list[str]
    replaced: bool = False  # a protected environment was swapped for another folder

    def message(self, workspace: Path) -> str:
        rel = self.path.relative_to(workspace)
        keys = f" (its config sets {', '.join(self.dangerous_keys)})" if self.dangerous_keys else ""
        where = f"moved to {self.moved_to.name}" if self.moved_to else "could not be moved"
        did = "put a new folder in place of the environment" if self.replaced else "created"
        return (
            f"the command {did} {rel}{keys}, which could run programs outside the sandbox "
            f"later; it was refused and {where}. Tell the user: only they can create it."
        )


def scan(workspace: Path) -> Scan:
    """Walk ``workspace`` (never following links, never crossing into other file systems)."""
    found = Scan()
    for name in SHELL_RC_FILES:
        inode = _inode(workspace / name)
        if inode is not None:
            found.rc_files.add(workspace / name)
            found.inodes.add(inode)
    walk = Walk(workspace, MAX_ENTRIES)
    for entry in walk:
        path = entry.path
        if entry.name == ".git":
            found.git.add(path)
            found.inodes.add(_inode(path) or (0, 0))
            for target in _pointed_to(path, workspace, found.outside_git):
                found.git.add(target)
                found.inodes.add(_inode(target) or (0, 0))
            entry.prune = True  # the whole folder is mounted read-only
        elif entry.name in TOOL_FILES and entry.kind in ("dir", "file"):
            found.rc_files.add(path)
            found.inodes.add(_inode(path) or (0, 0))
            entry.prune = True
        elif entry.kind == "dir" and (
            entry.name in PACKAGE_FOLDERS or any(kind_of(path / m) for m in ENV_MARKERS)
        ):
            found.environments[path] = _inode(path) or (0, 0)
            entry.prune = True
        elif entry.is_socket:
            found.sockets.add(path)
    found.complete = walk.complete
    return found


def _pointed_to(git: Path, workspace: Path, outside: set[Path]) -> set[Path]:
    """What a ``.git`` leads to: a link's target, the gitdir a ``.git`` file names, its
    ``commondir``, and the hooks folder its config names. Those outside the workspace go to
    ``outside``."""
    targets: set[Path] = set()
    gitdir = git
    kind = kind_of(git)
    if kind == "link":
        gitdir = git.resolve()
        targets.add(gitdir)
    elif kind == "file":
        line = (read_text(git, 4096) or "").strip()
        if line.startswith("gitdir:"):
            gitdir = (git.parent / line[7:].strip()).resolve()
            targets.add(gitdir)
    common = read_text(gitdir / "commondir", 4096)
    if common is not None:
        targets.add((gitdir / common.strip()).resolve())
    for folder in {gitdir, *targets}:
        hooks = _config_value(folder / "config", "core", "hookspath")
        if hooks:
            targets.add((git.parent / os.path.expanduser(hooks)).resolve())
    found = {t for t in targets if t.exists()}
    outside.update(t for t in found if not _inside(t, workspace))
    return {t for t in found if _inside(t, workspace)}


def dangerous_keys(config: Path) -> list[str]:
    """The keys in a git config file that make git run a program, and ``!`` aliases."""
    keys = []
    for key, value in _entries(config):
        if _RUNS_PROGRAMS.match(key) or (key.startswith("alias.") and value.startswith("!")):
            keys.append(key)
    return keys


def _entries(config: Path) -> list[tuple[str, str]]:
    """(section[.subsection].key lower-cased, value) pairs; enough of git's format for checks."""
    text = read_text(config, MAX_CONFIG_BYTES) or ""
    section = ""
    found = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        head = re.match(r'^\[\s*([^\]\s"]+)(?:\s+"([^"]*)")?\s*\]\s*(.*)$', line)
        if head:
            name, sub = head.group(1).lower(), head.group(2)
            section = f"{name}.{sub}" if sub is not None else name
            line = head.group(3)
            if not line:
                continue
        key, _, value = line.partition("=")
        found.append((f"{section}.{key.strip().lower()}", value.strip().strip('"')))
    return found


def _config_value(config: Path, section: str, key: str) -> str | None:
    for name, value in _entries(config):
        if name == f"{section}.{key}":
            return value
    return None


def refuse_new(before: Scan, after: Scan, workspace: Path) -> list[Refusal]:
    """Move aside every ``.git`` and start-up file that appeared between the two scans, and
    every protected environment that is another folder now."""
    refusals = []
    # By inode, not by name: a repository whose parent folder was renamed is the same inode
    # under a new name, and a new one can be made under the old name.
    new = sorted(p for p in after.git | after.rc_files if _inode(p) not in before.inodes)
    swapped = sorted(p for p, ino in before.environments.items() if _inode(p) not in (None, ino))
    for path in sorted({*new, *swapped}):
        if not os.path.lexists(path) or any(p in new or p in swapped for p in path.parents):
            continue
        keys: list[str] = []
        if path.name == ".git" and path.is_dir() and not path.is_symlink():
            keys = dangerous_keys(path / "config")
        refusals.append(Refusal(path, _move_aside(path), keys, path in swapped))
    return refusals


def _move_aside(path: Path) -> Path | None:
    target = path.with_name(path.name + REFUSED_SUFFIX)
    n = 1
    while os.path.lexists(target):
        target = path.with_name(f"{path.name}{REFUSED_SUFFIX}.{n}")
        n += 1
    try:
        os.rename(path, target)
    except OSError:
        return None
    return target


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
