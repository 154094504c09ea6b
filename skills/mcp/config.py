"""``[mcp.NAME]`` in the config file: one MCP server, how to reach it, what it may have."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skills.skill import DefaultRules


class McpServer(BaseModel):
    """A stdio server (``command``) or a streamable HTTP one (``url``)."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] | None = Field(default=None, description="argv of a stdio server")
    url: str | None = Field(default=None, description="endpoint of a streamable HTTP server")
    env: list[str] = Field(
        default_factory=list, description="variables passed to a stdio server from clawloop's"
    )
    read: list[str] = Field(
        default_factory=list, description="folders a stdio server may read (besides the system)"
    )
    network: bool = Field(
        default=False,
        description="a stdio server may reach any public host (through the sandbox's proxy)",
    )
    hosts: list[str] = Field(
        default_factory=list,
        description="the only hosts a stdio server may reach (host, host:port, *.domain)",
    )
    sandbox: bool = Field(default=True, description="run a stdio server under bubblewrap")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers")
    timeout_s: float = Field(default=60.0, gt=0)
    rules: DefaultRules = Field(default_factory=DefaultRules)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("set exactly one of command (stdio) or url (streamable HTTP)")
        if self.command is not None and not self.command:
            raise ValueError("command must name a program")
        return self
