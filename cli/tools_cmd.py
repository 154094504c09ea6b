"""``agent tools list`` and ``agent tools call``: the agent's tools, by hand, under the same rules.

``call`` goes through exactly what the agent loop uses (policy, approvals, sandbox, redaction,
audit), so a user can check a rule without a model.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agent.errors import ToolError, UserError
from agent.tools import observation
from cli.console import SafeConsole
from skills.context import SkillContext
from skills.guard import Approver, GuardedTool, rule_target
from skills.toolbox import build_toolbox, build_tools

tools_app = typer.Typer(help="List the agent's tools, or call one by hand.", no_args_is_help=True)


def list_tools(settings: Any, console: Console, as_json: bool = False) -> int:
    """Print every tool with its rule name, origin and schema."""
    context = SkillContext.from_settings(settings)
    tools = build_tools(context, _enabled(settings))
    if as_json:
        data = [
            {
                "name": t.name,
                "rule": rule_target(t).name,
                "source": source,
                "description": t.description,
                "parameters": t.parameters,
            }
            for t, source in tools
        ]
        console.print_json(json.dumps(data))
        return 0
    table = Table(title=f"tools (workspace {context.workspace})")
    for column in ("tool", "rule name", "from", "parameters", "description"):
        table.add_column(column, overflow="fold")
    for tool, source in tools:
        table.add_row(
            tool.name,
            rule_target(tool).name,
            source,
            escape(_signature(tool.parameters)),
            escape(tool.description),
        )
    console.print(table)
    return 0


def call_tool(
    settings: Any,
    name: str,
    arguments: str,
    approver: Approver,
    console: Console,
    as_json: bool = False,
) -> int:
    """Run one tool call as the agent would; print the decision and the result."""
    try:
        args = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"the arguments are not valid JSON ({exc.msg}); "
            'quote them, e.g. \'{"command": "ls"}\''
        ) from None
    if not isinstance(args, dict):
        raise UserError('the arguments must be a JSON object, e.g. \'{"path": "README.md"}\'')
    context = SkillContext.from_settings(settings)
    toolbox = build_toolbox(context, approver, _enabled(settings))
    tool = toolbox.get(name)
    if not isinstance(tool, GuardedTool):
        raise UserError(f"there is no tool named {name!r}; tools: {', '.join(toolbox.names())}")
    decision = tool.decide(args)
    ok, result = True, ""
    try:
        ok, result = observation(tool.call(args))
    except ToolError as exc:
        ok, result = False, f"error: {exc.message}"
    outcome: Literal["ok", "error"] = "ok" if ok else "error"
    if as_json:
        console.print_json(
            json.dumps(
                {
                    "tool": name,
                    "decision": decision.action,
                    "reason": decision.reason,
                    "outcome": outcome,
                    "result": result,
                }
            )
        )
    else:
        console.print(f"decision: [bold]{decision.action}[/bold] ({escape(decision.reason)})")
        console.print(f"outcome: {outcome}")
        console.print(escape(result), highlight=False)
    return 0 if ok else 1


def _enabled(settings: Any) -> list[str] | None:
    """The ``skills`` setting: a list of skill names, or None for every available skill."""
    skills = getattr(settings, "skills", None)
    return list(skills) if skills is not None else None


def _signature(schema: dict[str, Any]) -> str:
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    parts = []
    for pname, prop in props.items():
        kind = prop.get("type") or "|".join(
            str(p.get("type", "?")) for p in prop.get("anyOf", []) if isinstance(p, dict)
        )
        parts.append(f"{pname}: {kind}" + ("" if pname in required else "?"))
    return ", ".join(parts)


def _settings(sandbox: str | None) -> Any:
    from cli.config import load_settings

    settings = load_settings()
    if sandbox is not None:
        if sandbox not in ("bwrap", "off"):
            raise UserError(f"--sandbox must be 'bwrap' or 'off', not {sandbox!r}")
        new_sandbox = settings.sandbox.model_copy(update={"backend": sandbox})
        settings = settings.model_copy(update={"sandbox": new_sandbox})
    return settings


@tools_app.command("list")
def list_command(as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Show every tool, where it comes from, and its argument schema."""
    raise typer.Exit(list_tools(_settings(None), SafeConsole(), as_json))


@tools_app.command("call")
def call_command(
    tool: str = typer.Argument(..., help="tool name, e.g. shell or files_read"),
    arguments: str = typer.Argument("{}", help="JSON object of arguments"),
    yes: bool = typer.Option(False, "--yes", "-y", help="approve calls that would ask"),
    sandbox: str | None = typer.Option(None, "--sandbox", help="bwrap or off"),
    as_json: bool = typer.Option(False, "--json", help="print JSON; asks are denied"),
) -> None:
    """Run one tool call exactly as the agent would (rules, approvals, sandbox)."""
    from cli.approvals import choose_approver

    console = SafeConsole()
    approver = choose_approver(yes=yes, json_output=as_json, console=SafeConsole(stderr=True))
    raise typer.Exit(call_tool(_settings(sandbox), tool, arguments, approver, console, as_json))
