"""A run's token budget from the settings: its own limit, the day's, and its chat's."""

from __future__ import annotations

from agent.budget import Budget, BudgetLimits
from cli.config import Settings


def budget_limits(settings: Settings) -> BudgetLimits:
    """The ``[budgets]`` limits, counted against the traces folder."""
    limits = settings.budgets
    return BudgetLimits(
        settings.traces_dir, limits.run_tokens, limits.day_tokens, limits.chat_day_tokens
    )


def budget_for(settings: Settings, chat: str | None = None) -> Budget | None:
    """The allowances ``[budgets]`` sets for a run (of ``chat``, in the gateway); None if none."""
    return budget_limits(settings).budget(chat)
