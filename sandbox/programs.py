"""A view of the host system that holds only some programs: the executables a command may run.

A skill's manifest names its programs (``commands``). Rather than guess from a command line
what it will start (a shell can start a program in ways no parser sees: ``${x@P}``,
``trap``, ``declare -f`` bodies run later, ``eval``), the command is given a view in which
nothing else exists. Each program is found on the sandbox's ``PATH`` and shown read-only at
its own path, with what it needs to start:

- every link on the way to it (``/bin -> usr/bin``, ``python3 -> python3.11``);
- its interpreter: the ELF loader and the shared libraries ``ldd`` lists, or the ``#!``
  line's program (``env`` and the name after it) for a script;
- its own library folder, ``/usr/lib/NAME``, when there is one (Python's standard library,
  say), and the libraries that the modules in it link.

``/etc``, ``/usr/share`` and ``/usr/lib/locale`` (configuration and data, no programs) are
shown too. Everything is resolved on the host once per process and kept.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from sandbox.bwrap import SAFE_PATH, SYSTEM_PATHS

# Configuration and data every program may read; shown whole, read-only.
DATA_FOLDERS = ("/etc", "/usr/share", "/usr/lib/locale")
LIBRARY_ROOT = "/usr/lib"
# A command line handed to one of these (``bash -c``) needs it in the view to start at all; it
# can only run builtins and the programs that are there.
LAUNCH_SHELLS = frozenset({"bash", "sh", "dash"})
MAX_MODULES = 400  # shared objects of one library folder whose libraries are looked up
_LINK_DEPTH = 40
_LDD_PATH = re.compile(r"(?:=>\s*|^\s*)(/[^\s:]+)")


@dataclass(slots=True)
class ProgramView:
    """Host files and folders to show read-only at their own paths, and links to recreate."""

    files: set[str] = field(default_factory=set)
    folders: set[str] = field(default_factory=set)
    links: dict[str, str] = field(default_factory=dict)  # path -> its target, as read
    missing: list[str] = field(default_factory=list)  # declared names found nowhere

    def add(self, other: ProgramView) -> None:
        self.files |= other.files
        self.folders |= other.folders
        self.links.update(other.links)
        self.missing += other.missing

    def bwrap_args(self) -> list[str]:
        """bwrap options building this view on an empty root."""
        # bwrap makes missing parents private (0700); the command may run as another uid.
        args: list[str] = []
        for folder in self._parents():
            args += ["--perms", "0755", "--dir", folder]
        for path in sorted(self.folders):
            args += ["--ro-bind", path, path]
        for path in sorted(self.files):
            if not self._covered(path):
                args += ["--ro-bind", path, path]
        for path, target in sorted(self.links.items()):
            if not self._covered(path):
                args += ["--symlink", target, path]
        return args

    def executable_mounts(self) -> list[str]:
        """The mount points of this view that hold programs or libraries (the rest may be
        made noexec): every file bound on its own, and the folders but configuration and data,
        unless a program lies in one."""
        files = [p for p in self.files if not self._covered(p)]
        folders = [
            f
            for f in self.folders
            if f not in DATA_FOLDERS or any(p.startswith(f + "/") for p in self.files)
        ]
        return sorted({*files, *folders})

    def _parents(self) -> list[str]:
        found: set[str] = set()
        for path in [*self.folders, *self.files, *self.links]:
            if not self._covered(path):
                found.update(str(p) for p in Path(path).parents if str(p) != "/")
        return sorted(p for p in found if p not in self.links and not self._covered(p))

    def _covered(self, path: str) -> bool:
        return any(path.startswith(folder + "/") for folder in self.folders)


def program_view(names: Iterable[str]) -> ProgramView:
    """The view holding exactly the programs ``names`` (names, globs or absolute paths)."""
    view = ProgramView(folders={p for p in DATA_FOLDERS if os.path.isdir(p)})
    for top in SYSTEM_PATHS:  # /bin -> usr/bin: a #! line names either
        if os.path.islink(top):
            view.links[top] = os.readlink(top)
    for name in dict.fromkeys(names):
        found = _program(name)
        if found is None:
            view.missing.append(name)
        else:
            view.add(found)
    return view


def find_programs(name: str) -> list[str]:
    """Where ``name`` lies on the sandbox's ``PATH`` (a glob may match several programs)."""
    if "/" in name:
        return [name] if os.access(name, os.X_OK) else []
    found: list[str] = []
    for folder in SAFE_PATH.split(":"):
        if not set("*?[") & set(name):
            path = os.path.join(folder, name)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return [path]
            continue
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            continue
        for entry in entries:
            path = os.path.join(folder, entry)
            if fnmatchcase(entry, name) and os.path.isfile(path) and os.access(path, os.X_OK):
                found.append(path)
    return found


@functools.lru_cache(maxsize=256)
def _program(name: str) -> ProgramView | None:
    paths = find_programs(name)
    if not paths:
        return None
    view = ProgramView()
    for path in paths:
        real = trace(path, view.links)
        view.files.add(real)
        own = {f for f in (_library_folder(path), _library_folder(real)) if f is not None}
        for folder in sorted(own):
            view.folders.add(folder)
            view.add(_libraries(_modules(folder), set(view.folders)))
        interpreter = _interpreter(real)
        if interpreter:
            for word in interpreter:
                sub = _program(word)
                if sub is not None:
                    view.add(sub)
        else:
            view.add(_libraries([real], set(view.folders)))
    return view


@functools.lru_cache(maxsize=16)
def linked_libraries(binary: str) -> ProgramView:
    """The loader and shared libraries ``binary`` needs, without the binary itself."""
    return _libraries([binary], set())


def trace(path: str, links: dict[str, str], depth: int = 0) -> str:
    """The real path of ``path``; every link met on the way is added to ``links``."""
    if depth > _LINK_DEPTH:
        return path
    current = "/"
    for part in Path(path).parts[1:]:
        candidate = os.path.join(current, part)
        if os.path.islink(candidate):
            target = os.readlink(candidate)
            links[candidate] = target
            joined = os.path.normpath(os.path.join(current, target))
            current = trace(joined, links, depth + 1)
        else:
            current = os.path.normpath(candidate)
    return current


def _library_folder(path: str) -> str | None:
    folder = os.path.join(LIBRARY_ROOT, os.path.basename(path))
    return folder if os.path.isdir(folder) and not os.path.islink(folder) else None


def _modules(folder: str) -> list[str]:
    """The shared objects at most two folders down (Python's ``lib-dynload``, say)."""
    found: list[str] = []
    for pattern in ("*.so", "*/*.so", "*/*/*.so"):
        found += [str(p) for p in sorted(Path(folder).glob(pattern)) if p.is_file()]
    return found[:MAX_MODULES]


def _interpreter(path: str) -> list[str]:
    """A script's ``#!`` program (``env python3``: both), or [] for a binary."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return []
    if not first.startswith(b"#!"):
        return []
    words = first[2:].decode("utf-8", errors="replace").split()
    if words and os.path.basename(words[0]) == "env":
        return [words[0], *[w for w in words[1:2] if not w.startswith("-")]]
    return words[:1]


def _libraries(objects: Sequence[str], inside: set[str]) -> ProgramView:
    """The loader and shared libraries ``objects`` link, as ``ldd`` (the loader) lists them."""
    view = ProgramView()
    if not objects:
        return view
    try:
        listed = subprocess.run(
            ["ldd", *objects],
            capture_output=True,
            text=True,
            timeout=30,
            env={"PATH": SAFE_PATH, "LC_ALL": "C"},
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return view  # no ldd: the program shows as missing its libraries, and fails to start
    for line in listed.splitlines():
        match = _LDD_PATH.search(line)
        if match is None or line.rstrip().endswith(":"):
            continue  # a header line names the object itself
        real = trace(match.group(1), view.links)
        if not any(real.startswith(folder + "/") for folder in inside):
            view.files.add(real)
    return view
