"""The ``[sandbox]`` table of the user's config: mode, permission rules, limits, backend."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sandbox.flow import FlowSettings

Mode = Literal["read-only", "workspace-write", "full-access"]
Backend = Literal["bwrap", "off"]

# Passed through from clawloop's own environment when set; everything else is cleared.
DEFAULT_ENV_ALLOWLIST = ["LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "NO_COLOR"]


class ResourceLimits(BaseModel):
    """Bounds on one sandboxed command."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(
        default=120.0, gt=0, description="wall-clock limit; the whole tree is killed"
    )
    cpu_s: int = Field(default=300, gt=0, description="CPU seconds per process (RLIMIT_CPU)")
    memory_mb: int = Field(
        default=4096,
        gt=0,
        description="memory of the whole command (cgroup) and address space per process",
    )
    file_size_mb: int = Field(default=1024, gt=0, description="largest file a command may write")
    processes: int = Field(
        default=128, gt=0, description="processes the command may add (RLIMIT_NPROC)"
    )
    open_files: int = Field(default=1024, gt=0, description="open files per process")
    disk_budget_mb: int = Field(
        default=2048, gt=0, description="disk one command may take; past it, it is killed"
    )
    inode_budget: int = Field(
        default=50_000, gt=0, description="files and folders one command may add; past it, killed"
    )
    tmp_size_mb: int = Field(default=512, gt=0, description="size of the private /tmp")
    tmp_inodes: int = Field(
        default=50_000,
        ge=64,
        description="files, folders and links the private /tmp and /dev/shm may each hold",
    )
    output_bytes: int = Field(
        default=32_000,
        ge=1000,
        description="output kept per stream (head and tail); the rest is cut",
    )
    drain_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1000,
        description="output read before a runaway command is killed",
    )


class SandboxSettings(BaseModel):
    """Everything under ``[sandbox]`` in the config file."""

    model_config = ConfigDict(extra="forbid")

    mode: Mode = "workspace-write"
    backend: Backend = "bwrap"
    allow: list[str] = Field(default_factory=list)
    ask: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    limits: ResourceLimits = ResourceLimits()
    env_allowlist: list[str] = Field(default_factory=lambda: list(DEFAULT_ENV_ALLOWLIST))
    # The unprivileged uid a command runs as when clawloop itself runs as root.
    sandbox_uid: int = Field(default=65534, gt=0)
    # The data-flow gate and the tripwires (sandbox/flow.py).
    dataflow: FlowSettings = Field(default_factory=FlowSettings)
