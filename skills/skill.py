"""A skill: a named set of tools, with its default rules, its permissions and its lifecycle.

Built-in skills, Python plugins, SKILL.md folders and MCP servers all become a :class:`Skill`,
registered through one hook (``register_skills``), so the registry, the policy and the
permission checks treat them alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.tools import Tool
from sandbox.egress import check_hosts

if TYPE_CHECKING:
    from skills.context import SkillContext


class Permissions(BaseModel):
    """A skill's permission manifest: everything it may touch, checked at run time.

    ``commands`` are program names (``curl``) or command-line globs (``git log*``); ``read`` and
    ``write`` are path globs (relative to the workspace, or absolute); ``network`` are hosts
    (``api.example.org``, ``*.example.org``, ``host:port``, an address such as
    ``127.0.0.1:8080``); ``env`` are environment variables the skill's programs receive.
    """

    model_config = ConfigDict(extra="forbid")

    commands: list[str] = Field(default_factory=list)
    read: list[str] = Field(default_factory=list)
    write: list[str] = Field(default_factory=list)
    network: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list)

    @field_validator("network")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        return check_hosts(hosts)

    def lines(self) -> list[str]:
        """The manifest as lines a person reads before consenting."""
        out = []
        for label, values in (
            ("shell commands", self.commands),
            ("read paths", self.read),
            ("write paths", self.write),
            ("network hosts", self.network),
            ("environment variables", self.env),
        ):
            out.append(f"{label}: {', '.join(values) if values else '(none)'}")
        return out


class DefaultRules(BaseModel):
    """Rules a skill ships; the user's own ``[sandbox]`` rules come first."""

    model_config = ConfigDict(extra="forbid")

    allow: list[str] = Field(default_factory=list)
    ask: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


@dataclass(slots=True)
class Skill:
    """One skill as registered.

    ``start(context)`` returns its tools (and may open a connection or a process); ``close()``
    releases what ``start`` opened. ``permissions`` is None only for built-ins, which are held to
    the global rules alone; every other skill is held to its manifest as well.
    """

    name: str
    start: Callable[[SkillContext], list[Tool]]
    description: str = ""
    instructions: str | None = None  # SKILL.md skills: the markdown the model reads on demand
    rules: DefaultRules = field(default_factory=DefaultRules)
    permissions: Permissions | None = None
    close: Callable[[], None] | None = None
    requires: dict[str, list[str]] = field(default_factory=dict)  # {"bins": [...], "env": [...]}
    path: Path | None = None  # its file or folder, for those installed from one
    by_default: bool = True  # enabled when the config names no skills
    source: str = "builtin"  # set by the registry: "builtin", "plugin DIST", "folder PATH", ...
    metadata: dict[str, Any] = field(default_factory=dict)
    # Whether its tools' results may steer the agent. Off for every skill that is not built in,
    # unless its manifest says so (``trusted_output``): its results are a stranger's words.
    output_trusted: bool = False
    # Its own consequential tools: ``{"TOOL": ["ARG", ...]}`` (see sandbox/flow.py).
    consequential: dict[str, list[str]] = field(default_factory=dict)

    @property
    def trusted(self) -> bool:
        """Built-ins are part of clawloop; every other skill is held to its manifest."""
        return self.permissions is None
