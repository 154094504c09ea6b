"""Token budgets: limits a run checks before each model call, never in the middle of a tool call.

A budget holds allowances, each a limit and what was already spent against it before the run
began (today's earlier runs, say); the run's own tokens are added as it goes. The front end
decides which allowances a run gets and where the earlier spending is read from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

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


@dataclass(slots=True, frozen=True)
class BudgetLimits:
    """The token limits a front end sets (``[budgets]``): per run, per day, per chat per day;
    the day's spending is read from the traces in ``traces_dir``."""

    traces_dir: Path
    run_tokens: int | None = None
    day_tokens: int | None = None
    chat_day_tokens: int | None = None

    def budget(self, chat: str | None = None) -> Budget | None:
        """The allowances for a run (of ``chat``, in a gateway); None if there are none.

        Today's spending is read from the traces once, as the run starts: runs going on at the
        same time each count the others only as far as they had got then.
        """
        from agent.usage import read_usage, start_of_today, tokens_spent  # reads traces

        allowances: list[Allowance] = []
        if self.run_tokens is not None:
            allowances.append(Allowance("[budgets] run_tokens", "this run", self.run_tokens))
        per_chat = chat is not None and self.chat_day_tokens is not None
        wants_day = self.day_tokens is not None or per_chat
        today = read_usage(self.traces_dir, start_of_today()) if wants_day else []
        if self.day_tokens is not None:
            spent = tokens_spent(today)
            allowances.append(
                Allowance("[budgets] day_tokens", "today's runs", self.day_tokens, spent)
            )
        if chat is not None and self.chat_day_tokens is not None:
            spent = tokens_spent(today, chat)
            allowances.append(
                Allowance(
                    "[budgets] chat_day_tokens", "this chat today", self.chat_day_tokens, spent
                )
            )
        return Budget(allowances) if allowances else None
