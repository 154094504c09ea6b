"""The ``shell`` skill: one bash command in the workspace, inside the OS sandbox."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from agent.errors import ToolError
from agent.tools import Tool, function_tool
from sandbox.execute import CommandResult
from sandbox.rules import CommandSubject
from skills.context import SkillContext
from skills.guard import with_rule

_WHERE = {
    "read-only": "nothing can be written and there is no network",
    "workspace-write": "it can write only inside the workspace and /tmp, and there is no network",
    "full-access": "it has network access",
}


def make_shell_tools(context: SkillContext) -> list[Tool]:
    """The ``shell`` tool for this context."""
    limit = context.settings.limits.timeout_s

    def shell(
        command: Annotated[str, Field(description="the bash command line to run")],
        timeout_s: Annotated[
            float | None, Field(description="seconds before it is killed (capped by the config)")
        ] = None,
    ) -> str:
        """Run a bash command in the workspace and return its exit code, stdout and stderr."""
        if not command.strip():
            raise ToolError("the command is empty")
        if timeout_s is not None and timeout_s <= 0:
            raise ToolError("timeout_s must be a positive number of seconds")
        result = context.runner.run(["bash", "-c", command], timeout=timeout_s)
        if result.timed_out:
            raise ToolError(
                f"the command did not finish within {min(timeout_s or limit, limit):g} s and was "
                f"killed with everything it started.\n{format_result(result)}"
            )
        return format_result(result)

    tool = function_tool(shell)
    where = _WHERE.get(context.settings.mode, "")
    if context.settings.backend == "off":
        where = "the sandbox is off: it runs as the user, with only a timeout"
    tool.description += f" The command runs sandboxed: {where}."
    return [with_rule(tool, "shell", "exec", CommandSubject("command"))]


def format_result(result: CommandResult) -> str:
    """The observation the model reads."""
    status = "killed" if result.exit_code is None else str(result.exit_code)
    parts = [f"exit code: {status}"]
    if result.stdout:
        parts.append(f"stdout:\n{result.stdout.rstrip()}")
    if result.stderr:
        parts.append(f"stderr:\n{result.stderr.rstrip()}")
    if not result.stdout and not result.stderr:
        parts.append("(no output)")
    if result.killed_for_output:
        parts.append(
            "[the command produced too much output and was stopped; narrow it, e.g. "
            "with head, grep or a file]"
        )
    elif result.truncated:
        parts.append("[output truncated: only the beginning and the end are shown]")
    parts += [f"[sandbox: {note}]" for note in result.notes]
    return "\n".join(parts)
