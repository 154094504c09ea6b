"""The ``simple`` skill: one narrow tool per everyday file task, for small models.

A 135M-parameter model cannot compose ``wc -l notes.txt`` or a correct ``files_edit``, but it
can pick ``count_lines`` for "how many lines" and copy a file name from a list. So each tool
does one thing, takes at most three plain arguments, and answers in a whole sentence the model
can pass on. Path arguments that must name an existing file or folder are marked, and the
toolbox offers them as an enum of what is really in the workspace (:mod:`skills.workspace_enums`),
so a grammar-constrained model can only name a real file.

Reads go through the workspace's path resolver; everything that changes files or runs a
program runs as a plain argument vector inside the OS sandbox, like the shell tool.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Annotated, Any

from pydantic import Field

from agent.errors import ToolError
from agent.tools import Tool, ToolResult, function_tool
from sandbox.execute import CommandResult
from sandbox.rules import Effect, PathSubject, Subject
from sandbox.safewalk import Walk
from skills.context import SkillContext
from skills.files import MAX_CALL_SECONDS, MAX_WALK, _read_text, _write_text, file_provenance
from skills.guard import with_rule
from skills.simple_command import make_command_tool

MAX_SHOWN = 4000
ANSWER_TOOL = "answer"

FileArg = Annotated[
    str, Field(description="a file in the workspace", json_schema_extra={"x-workspace": "file"})
]
FolderArg = Annotated[
    str, Field(description="a folder in the workspace", json_schema_extra={"x-workspace": "folder"})
]
ScriptArg = Annotated[
    str,
    Field(description="a .py or .sh file", json_schema_extra={"x-workspace": "script"}),
]
NewPathArg = Annotated[str, Field(description="a path in the workspace")]


def make_simple_tools(context: SkillContext) -> list[Tool]:
    """The ``simple`` tools for this context."""
    paths = context.paths

    def text_of(path: str) -> str:
        resolved = paths.resolve(path)
        if resolved.is_dir():
            raise ToolError(f"{path} is a folder, not a file; use list_files")
        return _read_text(paths, resolved)

    def run(argv: list[str], what: str) -> CommandResult:
        result = context.runner.run(argv)
        if result.timed_out:
            raise ToolError(f"{what} did not finish in time and was stopped")
        return result

    def changed(argv: list[str], done: str) -> str:
        result = run(argv, argv[0])
        if result.exit_code != 0:
            reason = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["failed"]
            raise ToolError(f"{argv[0]} failed: {reason[0]}")
        return done

    def count_lines(path: FileArg) -> str:
        """Count the lines of a file: how many lines it has, its length in lines."""
        n = len(text_of(path).splitlines())
        return f"{path} has {n} line{'s' * (n != 1)}."

    def count_words(path: FileArg) -> str:
        """Count the words of a file: how many words it has."""
        n = len(text_of(path).split())
        return f"{path} has {n} word{'s' * (n != 1)}."

    def count_bytes(path: FileArg) -> str:
        """Count the bytes of a file: its size, how big it is."""
        resolved = paths.resolve(path)
        if not resolved.is_file():
            raise ToolError(f"{path} is not a file")
        return f"{path} has {resolved.stat().st_size} bytes."

    def read_file(path: FileArg) -> ToolResult:
        """Read a file and show its text: what it says, its contents, a value or setting in a
        config, settings, JSON, YAML, TOML, INI or .env file."""
        text = text_of(path)
        if len(text) > MAX_SHOWN:
            text = text[:MAX_SHOWN] + f"\n[cut: the file has {len(text)} characters]"
        shown = text if text.strip() else f"{path} is empty."
        return ToolResult.text(shown, provenance=file_provenance(context, path))

    def list_files(folder: FolderArg = ".") -> str:
        """List the files in a folder or directory: what files are here, which files there are."""
        root = paths.resolve(folder)
        if not root.is_dir():
            raise ToolError(f"{folder} is not a folder")
        names = sorted(
            e.name + ("/" if e.is_dir() else "") for e in os.scandir(root) if e.name != ".git"
        )
        where = "the workspace" if folder in {".", ""} else folder
        return f"Files in {where}: {', '.join(names)}." if names else f"{where} is empty."

    def find_text(text: Annotated[str, Field(description="the word or text to look for")]) -> str:
        """Search the files: find which file contains, mentions, has or talks about a word or text,
        or where something is defined."""
        needle = text.strip().lower()
        if not needle:
            raise ToolError("give the word to look for")
        hits = []
        # Bounded, link-free and never opening a FIFO: sandbox.safewalk.
        for entry in Walk(paths.workspace, MAX_WALK, MAX_CALL_SECONDS):
            entry.prune = entry.kind == "dir" and entry.name.startswith(".")
            if entry.kind != "file":
                continue
            rel = os.path.relpath(entry.path, paths.workspace)
            try:
                if needle in _read_text(paths, paths.resolve(rel)).lower():
                    hits.append(rel)
            except (ToolError, OSError):
                continue
        if not hits:
            return f"No file contains {text!r}."
        return f"{text!r} is in {', '.join(hits)}."

    def run_script(path: ScriptArg) -> str:
        """Run or execute a Python (.py) or shell (.sh) script or program and show its output: what
        it prints, whether it passes."""
        suffix = PurePosixPath(path).suffix
        program = {".py": "python3", ".sh": "bash"}.get(suffix)
        if program is None:
            raise ToolError(f"{path} is not a .py or .sh script")
        paths.resolve(path)
        result = run([program, path], path)
        out = (result.stdout + result.stderr).strip()[:MAX_SHOWN] or "(nothing)"
        status = "" if result.exit_code == 0 else f" (it failed with exit code {result.exit_code})"
        return f"{path} printed{status}:\n{out}"

    def write_file(
        path: NewPathArg, content: Annotated[str, Field(description="the text to write")]
    ) -> str:
        """Create or write a new file with the given text or content (replaces the file if it
        exists)."""
        resolved = paths.resolve(path, for_write=True)
        if resolved.is_dir():
            raise ToolError(f"{path} is a folder")
        _write_text(paths, resolved, content if content.endswith("\n") else content + "\n")
        return f"Wrote {path}."

    def append_line(
        path: FileArg, line: Annotated[str, Field(description="the line to add")]
    ) -> str:
        """Append or add a line at the end of a file."""
        text = text_of(path)
        if text and not text.endswith("\n"):
            text += "\n"
        _write_text(paths, paths.resolve(path, for_write=True), text + line.rstrip("\n") + "\n")
        return f"Added the line to {path}."

    def replace_text(
        path: FileArg,
        old: Annotated[str, Field(description="the text to replace")],
        new: Annotated[str, Field(description="the new text")],
    ) -> str:
        """Replace or change a word or text with another in a file; edit it, fix a typo or a bug."""
        text = text_of(path)
        count = text.count(old) if old else 0
        if count == 0:
            raise ToolError(f"{old!r} is not in {path}; read_file shows what is there")
        _write_text(paths, paths.resolve(path, for_write=True), text.replace(old, new))
        return f"Replaced {old!r} with {new!r} in {path} ({count} time{'s' * (count != 1)})."

    def sort_lines(path: FileArg, to: NewPathArg) -> str:
        """Sort the lines of a file in alphabetical order and write them to another file."""
        lines = sorted(text_of(path).splitlines())
        _write_text(paths, paths.resolve(to, for_write=True), "".join(f"{x}\n" for x in lines))
        return f"Wrote the {len(lines)} lines of {path}, sorted, to {to}."

    def move_file(path: FileArg, to: NewPathArg) -> str:
        """Rename a file, or move it into a folder or directory."""
        paths.resolve(path, for_write=True)
        paths.resolve(to, for_write=True)
        return changed(["mv", "-n", "--", path, to], f"Moved {path} to {to}.")

    def copy_file(path: FileArg, to: NewPathArg) -> str:
        """Copy or duplicate a file to a new name or a backup."""
        paths.resolve(path)
        paths.resolve(to, for_write=True)
        return changed(["cp", "-n", "--", path, to], f"Copied {path} to {to}.")

    def delete_file(path: FileArg) -> str:
        """Delete or remove a file."""
        if paths.resolve(path, for_write=True).is_dir():
            raise ToolError(f"{path} is a folder; only files are deleted")
        return changed(["rm", "-f", "--", path], f"Deleted {path}.")

    def make_folder(path: NewPathArg) -> str:
        """Create or make a new folder or directory (and its parents)."""
        paths.resolve(path, for_write=True)
        return changed(["mkdir", "-p", "--", path], f"Created the folder {path}.")

    # No description on ``text``: a small model copies a description into its answer verbatim.
    def answer(text: str) -> str:
        """Reply to the user: your final answer, once you know it or the task is done, or a reply to
        a greeting, a thanks or a general question."""
        return text

    def ruled(fn: Callable[..., Any], rule: str, effect: Effect, subject: Subject | None) -> Tool:
        return with_rule(function_tool(fn), rule, effect, subject)

    def read(fn: Callable[..., Any]) -> Tool:
        return ruled(fn, "files.read", "read", PathSubject("path"))

    def write(fn: Callable[..., str], arg: str = "path") -> Tool:
        return ruled(fn, "files.write", "write", PathSubject(arg))

    return [
        read(count_lines),
        read(count_words),
        read(count_bytes),
        read(read_file),
        ruled(list_files, "files.list", "read", PathSubject("folder")),
        ruled(find_text, "files.search", "read", None),
        ruled(run_script, "run_script", "exec", PathSubject("path")),
        write(write_file),
        write(append_line),
        write(replace_text),
        write(sort_lines, "to"),
        write(move_file),
        write(copy_file, "to"),
        write(delete_file),
        write(make_folder),
        make_command_tool(context),
        ruled(answer, ANSWER_TOOL, "read", None),
    ]
