"""The task-suite format (YAML), validated at the edge.

::

    name: basic
    memory: false               # optional: run every task with memory on (see below)
    tasks:
      - id: count-lines
        prompt: How many lines are in notes.txt?
        files: {notes.txt: "a\\nb\\n"}
        max_steps: 6            # optional
        memory: {MEMORY.md: "- my cat is Pixel\n"}  # optional: memory files it starts with
        before: ["Remember that my cat is called Pixel."]  # optional: sent first, each in
                                # a fresh session of its own, so only memory carries them
        family: count           # optional: the task family, for training filters
        check:                  # every part given must hold (only the prompt's run is checked)
          answer_regex: '\\b2\\b'  # searched in the final answer
          files: {out.txt: 'x'} # the regex must match the whole file
          absent: [old.txt]     # these paths must not exist
          command: "test -d build"  # run in the workspace afterwards; exit 0 passes
          max_calls: 0          # at most this many tool calls
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent.errors import UserError


class Check(BaseModel):
    """What must hold after a task's run."""

    model_config = ConfigDict(extra="forbid")

    answer_regex: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    absent: list[str] = Field(default_factory=list)
    command: str | None = None
    max_calls: int | None = Field(default=None, ge=0)

    @field_validator("answer_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            re.compile(value)
        return value

    @field_validator("files")
    @classmethod
    def _file_regexes_compile(cls, value: dict[str, str]) -> dict[str, str]:
        for path, pattern in value.items():
            _relative(path)
            re.compile(pattern)
        return value


class Task(BaseModel):
    """One task: a prompt, the workspace it starts from, and its check."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    prompt: str = Field(min_length=1)
    files: dict[str, str] = Field(default_factory=dict)
    max_steps: int | None = Field(default=None, ge=1)
    # Memory files (relative to the memory folder) the task starts with, and messages sent
    # before the prompt, each in a fresh session. Either runs the task with memory on.
    memory: dict[str, str] = Field(default_factory=dict)
    before: list[str] = Field(default_factory=list)
    # The task family (a generator's name, or any label a suite gives): traces record it, so
    # `agent train --from-traces --family F` can pick one family's graded runs.
    family: str | None = None
    check: Check

    @field_validator("files", "memory")
    @classmethod
    def _paths_are_relative(cls, value: dict[str, str]) -> dict[str, str]:
        for path in value:
            _relative(path)
        return value

    @property
    def uses_memory(self) -> bool:
        return bool(self.memory or self.before)


class Suite(BaseModel):
    """A named list of tasks."""

    model_config = ConfigDict(extra="forbid")

    name: str
    # Every task runs with memory on, over an empty memory folder of its own (a task's
    # ``memory`` or ``before`` turns it on for that task alone).
    memory: bool = False
    tasks: list[Task] = Field(min_length=1)

    @field_validator("tasks")
    @classmethod
    def _unique_ids(cls, value: list[Task]) -> list[Task]:
        seen: set[str] = set()
        for task in value:
            if task.id in seen:
                raise ValueError(f"task id {task.id!r} is used twice")
            seen.add(task.id)
        return value


def _relative(path: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise ValueError(f"{path!r} must be a relative path inside the workspace")
    return path


def load_suite(path: Path) -> Suite:
    """Read and validate a suite file; any problem is a UserError naming the file."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"no suite file {path}: give the path of a suite YAML file") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    try:
        return Suite.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise UserError(f"{path}: {where}: {first['msg']}") from None
