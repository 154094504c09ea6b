"""A run's token budget from the settings: its own limit, the day's, and its chat's."""

from __future__ import annotations

from agent.budget import Allowance, Budget
from agent.usage import read_usage, start_of_today, tokens_spent
from cli.config import Settings


def budget_for(settings: Settings, chat: str | None = None) -> Budget | None:
    """The allowances ``[budgets]`` sets for a run (of ``chat``, in the gateway); None if none.

    Today's spending is read from the traces once, as the run starts: runs going on at the
    same time each count the others only as far as they had got then.
    """
    limits = settings.budgets
    allowances: list[Allowance] = []
    if limits.run_tokens is not None:
        allowances.append(Allowance("[budgets] run_tokens", "this run", limits.run_tokens))
    wants_day = limits.day_tokens is not None or (
        chat is not None and limits.chat_day_tokens is not None
    )
    today = read_usage(settings.traces_dir, start_of_today()) if wants_day else []
    if limits.day_tokens is not None:
        allowances.append(
            Allowance(
                "[budgets] day_tokens", "today's runs", limits.day_tokens, tokens_spent(today)
            )
        )
    if chat is not None and limits.chat_day_tokens is not None:
        allowances.append(
            Allowance(
                "[budgets] chat_day_tokens",
                "this chat today",
                limits.chat_day_tokens,
                tokens_spent(today, chat),
            )
        )
    return Budget(allowances) if allowances else None
