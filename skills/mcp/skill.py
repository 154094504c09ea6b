"""An MCP server as a skill: its tools, named ``SERVER_TOOL`` for the model and
``mcp.SERVER.TOOL`` for rules; every call asks unless a rule allows it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from agent.provenance import Provenance
from agent.tools import ContentPart, Tool, ToolResult
from sandbox.rules import RuleTarget
from sandbox.runner import Grant, SandboxRunner
from sandbox.service import ServiceLaunch, service_launch
from skills.context import SkillContext
from skills.mcp.client import McpConnection
from skills.mcp.config import McpServer
from skills.skill import Permissions, Skill


@dataclass(slots=True)
class McpTool:
    """One tool of an MCP server."""

    name: str
    description: str
    parameters: dict[str, Any]
    remote: str
    connection: McpConnection = field(repr=False)
    rule_target: RuleTarget = field(default_factory=lambda: RuleTarget("mcp"))
    source: str = "mcp"
    # What a server returns is outside the user's control, like a web page.
    provenance: Provenance = field(default_factory=lambda: Provenance.mcp(""))

    def call(self, arguments: dict[str, Any]) -> ToolResult:
        result = self.connection.call(self.remote, arguments)
        parts = tuple(_part(block) for block in result.content)
        if not parts and result.structured_content is not None:
            parts = (ContentPart(json.dumps(result.structured_content)),)
        parts = tuple(ContentPart(p.text, p.type, untrusted=True) for p in parts)
        content = parts or (ContentPart("(no content)"),)
        return ToolResult(content, bool(result.is_error), self.provenance)


def _part(block: Any) -> ContentPart:
    kind = getattr(block, "type", "")
    if kind == "text":
        return ContentPart(block.text)
    if kind in ("image", "audio"):
        shown: Literal["image", "audio"] = "image" if kind == "image" else "audio"
        return ContentPart(f"[{kind} ({block.mime_type}) returned; it cannot be shown]", shown)
    if kind == "resource":
        res = block.resource
        text = getattr(res, "text", None)
        return ContentPart(text if text is not None else f"[binary resource {res.uri}]", "resource")
    if kind == "resource_link":
        return ContentPart(f"[resource {getattr(block, 'uri', '')}]", "resource")
    return ContentPart(f"[{kind or 'unknown'} content]")


def mcp_skill(name: str, server: McpServer) -> Skill:
    """The skill for ``[mcp.NAME]``; ``start`` connects, ``close`` disconnects."""
    connections: list[McpConnection] = []

    def start(context: SkillContext) -> list[Tool]:
        launch = None
        if server.command is not None:
            launch = _launch(server, context)
        connection = McpConnection(name, server, launch)
        remote_tools = connection.open()
        connections.append(connection)
        tools: list[Tool] = []
        for remote in remote_tools:
            tools.append(
                McpTool(
                    name=f"{name}_{remote.name}",
                    description=remote.description or f"{remote.name} (from MCP server {name})",
                    parameters=remote.input_schema or {"type": "object", "properties": {}},
                    remote=remote.name,
                    connection=connection,
                    rule_target=RuleTarget(f"mcp.{name}.{remote.name}", "other"),
                    provenance=Provenance.mcp(name),
                )
            )
        return tools

    def close() -> None:
        while connections:
            connections.pop().close()

    where = " ".join(server.command) if server.command else str(server.url)
    return Skill(
        name=name,
        start=start,
        description=f"Tools from the MCP server {where}.",
        rules=server.rules,
        # What the server process may have; the sandbox around it enforces this.
        permissions=Permissions(
            commands=server.command[:1] if server.command else [],
            read=server.read,
            network=_hosts(server) if server.command else [_host_of(str(server.url))],
            env=server.env,
        ),
        close=close,
        source=f"mcp {where}",
        metadata={"configured": True},
    )


def _hosts(server: McpServer) -> list[str]:
    """The hosts a stdio server may reach through the egress proxy (``network = true``: any
    public host)."""
    return ["*"] if server.network else list(server.hosts)


def _launch(server: McpServer, context: SkillContext) -> ServiceLaunch:
    """The server's command line under the command sandbox, with what it declares added."""
    assert server.command is not None  # checked by McpServer's validator
    settings = context.settings.model_copy(update={"env_allowlist": []})
    if not server.sandbox:
        settings = settings.model_copy(update={"backend": "off"})
    inner = getattr(context.runner, "inner", context.runner)  # a skill's runner is scoped
    runner = SandboxRunner(
        settings,
        context.workspace,
        context.environ,
        getattr(inner, "hidden", ()),
        grant=Grant(network=_hosts(server)),
    )
    # The variables the user declared for this server, whatever their names say.
    declared = {name: context.environ[name] for name in server.env if name in context.environ}
    return service_launch(runner, server.command, server.read, declared)


def _host_of(url: str) -> str:
    """``host:port`` of a server URL, as a manifest names a network host."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
