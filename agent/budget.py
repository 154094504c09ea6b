"""Token budgets: limits a run checks before each model call, never in the middle of a tool call.

A budget holds allowances, each a limit and what was already spent against it before the run
began (today's earlier runs, say); the run's own tokens are added as it goes. The front end
decides which allowances a run gets and where the earlier spending is read from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.events import UsageEvent


@dataclass(slots=True)
class Allowance:
    """One limit on tokens (prompt plus completion)."""

    name: str  # the setting it comes from, as people set it: "[budgets] day_tokens"
    what: str  # what it limits, for the message: "today's runs"
    limit: int
    spent_before: int = 0  # by earlier runs, as of this run's start


@dataclass(slots=True)
class Budget:
    """The allowances one run must stay within."""

    allowances: list[Allowance] = field(default_factory=list)

    def exceeded(self, usage: UsageEvent) -> str | None:
        """A message for the person if an allowance is used up, else None."""
        used = usage.prompt_tokens + usage.completion_tokens
        for allowance in self.allowances:
            total = allowance.spent_before + used
            if total >= allowance.limit:
                return (
                    f"stopped: the token budget {allowance.name} = {allowance.limit:,} is "
                    f"used up ({total:,} tokens by {allowance.what}); raise it in the config "
                    "file to go on"
                )
        return None
