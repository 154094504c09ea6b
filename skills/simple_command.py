"""``run_command``: the small-model profile's general path, one shell command line.

The narrow tools of :mod:`skills.simple` cover the commonest requests, but everyday file work has
no end of kinds: the first line of a file, a column's total, the files matching a pattern,
a script made executable. For everything else the model writes one command line (``grep -c``,
``sort | uniq``, ``awk``, ``find -name``, ``head``, ``sed -n``, ``mkdir -p``, ``python3 -c``)
and reads back only what it printed: a small model copies what it reads, so the observation is
the bare output, not the shell tool's exit-code report.

It runs exactly like the ``shell`` tool: ``bash -c`` inside the OS sandbox, behind the
``shell`` permission rules.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from agent.errors import ToolError
from agent.tools import Tool, function_tool
from sandbox.execute import CommandResult
from sandbox.rules import CommandSubject
from skills.context import SkillContext
from skills.guard import with_rule

COMMAND_TOOL = "run_command"
MAX_SHOWN = 2000


def make_command_tool(context: SkillContext) -> Tool:
    """The ``run_command`` tool for this context."""

    def run_command(
        command: Annotated[str, Field(description="the shell command line to run")],
    ) -> str:
        """Run a shell command line in the workspace and show what it prints: grep, wc, head,
        tail, sed, sort, uniq, cut, awk, find, ls, chmod, mkdir, cp, mv, rm, cat, tr, python3.
        Use it to compute a sum, total, average, maximum or minimum, to search lines or
        patterns, to look at a line, a column, a row or a field, and for anything no other
        tool does."""
        if not command.strip():
            raise ToolError("the command is empty")
        result = context.runner.run(["bash", "-c", command])
        if result.timed_out:
            raise ToolError("the command did not finish in time and was stopped")
        return observation(result)

    return with_rule(function_tool(run_command), "shell", "exec", CommandSubject("command"))


def observation(result: CommandResult) -> str:
    """What the model reads: the output alone when it worked, the error when it failed."""
    out = result.stdout.strip()
    err = result.stderr.strip()
    if len(out) > MAX_SHOWN:
        out = out[:MAX_SHOWN] + f"\n[cut: {len(result.stdout)} characters in all]"
    if result.exit_code == 0:
        return out or "Done (no output)."
    if result.exit_code == 1 and not err:
        # grep's "no line matched" (grep -c still prints its 0)
        return out or "No match (nothing printed)."
    reason = err.splitlines()[-1] if err else out[-300:] or "no output"
    status = "killed" if result.exit_code is None else f"exit code {result.exit_code}"
    return f"The command failed ({status}): {reason}"
