"""The ``files`` skill: read, write, edit, list and search files inside the workspace.

Every path goes through :class:`sandbox.paths.PathResolver`: nothing outside the workspace,
no links out of it, and the always-protected paths are never written. Every call is bounded:
only regular files are opened (never blocking on a FIFO), searches use RE2 (linear time, no
catastrophic backtracking), and walks (:mod:`sandbox.safewalk`: no link followed, bounded in
entries and time) stop at a deadline with what they found so far.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from agent.errors import ToolError
from agent.provenance import Provenance
from agent.tools import Tool, ToolResult, function_tool
from sandbox.flow import untrusted_path
from sandbox.paths import PathResolver
from sandbox.rules import Effect, PathSubject
from sandbox.safewalk import Walk
from skills.context import SkillContext
from skills.guard import with_rule

MAX_READ_CHARS = 100_000
MAX_LIST = 500
MAX_MATCHES = 200
MAX_SEARCH_FILE = 2 * 1024 * 1024
MAX_WALK = 100_000  # entries a list or search looks at, at most
_SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", ".mypy_cache"})
# No files call takes longer than this, whatever the folder holds.
MAX_CALL_SECONDS = 20.0
RE2_HINT = "the files search needs google-re2: `pip install google-re2`"

PathArg = Annotated[str, Field(description="a path relative to the workspace")]


def _read_text(paths: PathResolver, resolved: Path) -> str:
    fd = paths.open(resolved, os.O_RDONLY)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(MAX_SEARCH_FILE * 8)
    if b"\x00" in data[:8192]:
        raise ToolError(f"{paths.relative(resolved)!r} is a binary file; it cannot be read as text")
    return data.decode("utf-8", errors="replace")


def _write_text(paths: PathResolver, resolved: Path, content: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = paths.open(resolved, flags, 0o666, make_parents=True)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(content)


def file_provenance(context: SkillContext, relative: str) -> Provenance:
    """A workspace file is the user's own and trusted, unless it lies under one of the
    ``untrusted_paths`` of ``[sandbox.dataflow]`` (downloads, by default)."""
    untrusted = untrusted_path(relative, context.settings.dataflow.untrusted_paths)
    return Provenance.workspace(relative, trusted=not untrusted)


def compile_pattern(pattern: str) -> Any:
    """A linear-time (RE2) regular expression, or :class:`ToolError` saying what is wrong."""
    try:
        import re2
    except ImportError as exc:  # a dependency of clawloop; only a broken install lacks it
        raise ToolError(f"{RE2_HINT}. Tell the user.") from exc
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raise ToolError(
            f"invalid regular expression (RE2 syntax: no backreferences or lookaround): {exc}"
        ) from exc


def make_files_tools(context: SkillContext) -> list[Tool]:
    """The five ``files`` tools for this context."""
    paths = context.paths
    limit = min(MAX_CALL_SECONDS, context.settings.limits.timeout_s)

    def files_read(
        path: PathArg,
        offset: Annotated[int, Field(ge=1, description="first line to read (1-based)")] = 1,
        limit: Annotated[int, Field(ge=1, le=10_000, description="lines to read")] = 2000,
    ) -> ToolResult:
        """Read a text file from the workspace, optionally a range of lines."""
        resolved = paths.resolve(path)
        if resolved.is_dir():
            raise ToolError(f"{path!r} is a folder; use files_list")
        lines = _read_text(paths, resolved).splitlines(keepends=True)
        chosen = lines[offset - 1 : offset - 1 + limit]
        text = "".join(chosen)
        note = ""
        if len(text) > MAX_READ_CHARS:
            text = text[:MAX_READ_CHARS]
            note = f"\n[cut at {MAX_READ_CHARS} characters; read fewer lines at a time]"
        end = offset - 1 + len(chosen)
        if offset > 1 or end < len(lines):
            note += f"\n[lines {offset}-{end} of {len(lines)}; use offset to read more]"
        return ToolResult.text(
            text + note if text or note else "(empty file)",
            provenance=file_provenance(context, paths.relative(resolved)),
        )

    def files_write(
        path: PathArg, content: Annotated[str, Field(description="the whole file")]
    ) -> str:
        """Create or overwrite a file in the workspace with the given content."""
        resolved = paths.resolve(path, for_write=True)
        if resolved.is_dir():
            raise ToolError(f"{path!r} is a folder")
        _write_text(paths, resolved, content)
        return f"wrote {len(content.encode('utf-8'))} bytes to {paths.relative(resolved)}"

    def files_edit(
        path: PathArg,
        old_text: Annotated[str, Field(description="text that occurs exactly once in the file")],
        new_text: Annotated[str, Field(description="the replacement")],
    ) -> str:
        """Replace one exact, unique occurrence of old_text with new_text in a file."""
        resolved = paths.resolve(path, for_write=True)
        if not old_text:
            raise ToolError("old_text is empty; give the exact text to replace")
        text = _read_text(paths, resolved)
        count = text.count(old_text)
        if count != 1:
            hint = (
                "was not found; read the file and copy the text exactly"
                if count == 0
                else f"occurs {count} times; include more surrounding lines so it is unique"
            )
            raise ToolError(f"old_text {hint} ({paths.relative(resolved)})")
        _write_text(paths, resolved, text.replace(old_text, new_text, 1))
        return f"edited {paths.relative(resolved)}: replaced 1 occurrence"

    def files_list(
        path: Annotated[str, Field(description="a folder relative to the workspace")] = ".",
        recursive: Annotated[bool, Field(description="include subfolders")] = False,
    ) -> str:
        """List the files and folders under a folder of the workspace (folders end with /)."""
        root = paths.resolve(path)
        if not root.is_dir():
            raise ToolError(f"{path!r} is not a folder")
        entries: list[str] = []
        walk = Walk(root, MAX_WALK, limit)
        for entry in walk:
            if paths.hidden(entry.path) is not None:
                entry.prune = True
                continue
            if entry.kind == "dir":
                entry.prune = not recursive or entry.name in _SKIP_DIRS
                if entry.name not in _SKIP_DIRS:
                    entries.append(paths.relative(entry.path) + "/")
            else:
                entries.append(paths.relative(entry.path))
            if len(entries) > MAX_LIST * 4:
                break
        stopped = "" if walk.complete else f"\n[stopped after {limit:g} s; list a smaller folder]"
        entries.sort()
        shown = entries[:MAX_LIST]
        more = f"\n[{len(entries) - MAX_LIST} more not shown]" if len(entries) > MAX_LIST else ""
        return ("\n".join(shown) + more if shown else "(empty folder)") + stopped

    def files_search(
        pattern: Annotated[str, Field(description="a Python regular expression")],
        path: Annotated[str, Field(description="folder or file to search")] = ".",
        glob: Annotated[
            str | None, Field(description="only file names matching, e.g. *.py")
        ] = None,
    ) -> str:
        """Search text files in the workspace for a regular expression (RE2 syntax); returns
        path:line: text."""
        regex = compile_pattern(pattern)
        root = paths.resolve(path)
        matches: list[str] = []
        deadline = time.monotonic() + limit
        for file in _files_under(root, glob, limit):
            if file is None or time.monotonic() > deadline:
                matches.append(f"[stopped after {limit:g} s; search a smaller folder]")
                break
            try:
                if file.lstat().st_size > MAX_SEARCH_FILE:
                    continue  # big files are skipped
                text = _read_text(paths, file)
            except (ToolError, OSError):
                continue  # binary, vanished or unreadable files are skipped
            for number, line in enumerate(text.splitlines(), 1):
                if regex.search(line):
                    matches.append(f"{paths.relative(file)}:{number}: {line[:300]}")
                    if len(matches) >= MAX_MATCHES:
                        return "\n".join(matches) + f"\n[stopped at {MAX_MATCHES} matches]"
        return "\n".join(matches) if matches else "no matches"

    def target(fn: Callable[..., Any], rule: str, effect: Effect) -> Tool:
        return with_rule(function_tool(fn), rule, effect, PathSubject("path"))

    return [
        target(files_read, "files.read", "read"),
        target(files_write, "files.write", "write"),
        target(files_edit, "files.edit", "write"),
        target(files_list, "files.list", "read"),
        target(files_search, "files.search", "read"),
    ]


def _files_under(root: Path, glob: str | None, seconds: float) -> Iterator[Path | None]:
    """The regular files under ``root`` (``root`` itself if it is not a folder); links, FIFOs,
    sockets and devices are skipped. None last if the walk was cut short."""
    if not root.is_dir():
        yield root
        return
    walk = Walk(root, MAX_WALK, seconds)
    for entry in walk:
        if entry.kind == "dir":
            entry.prune = entry.name in _SKIP_DIRS
        elif entry.kind == "file" and (glob is None or Path(entry.name).match(glob)):
            yield entry.path
    if not walk.complete:
        yield None
