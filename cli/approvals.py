"""Who answers "ask": the person at the terminal, ``--yes``, or no one (deny)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.prompt import Prompt

from skills.guard import Answer, ApprovalRequest, Approver


def _config_add_rule(kind: str, pattern: str) -> Path:
    from cli.config import add_rule  # the config module owns the file format

    return add_rule(kind, pattern)


class TerminalApprover:
    """Shows the exact call and asks: once, always (saved as an allow rule), or deny."""

    name = "user"

    def __init__(
        self,
        console: Console | None = None,
        add_rule: Callable[[str, str], Path] = _config_add_rule,
        prompt: Callable[[str], str] | None = None,
    ) -> None:
        self.console = console or Console(stderr=True)
        self.add_rule = add_rule
        self.prompt = prompt or self._ask

    def _ask(self, question: str) -> str:
        return Prompt.ask(question, choices=["o", "a", "d"], default="d", console=self.console)

    def ask(self, request: ApprovalRequest) -> Answer:
        body = (
            f"[bold]{escape(request.describe())}[/bold]\n"
            f"why asked: {escape(request.reason)}\n"
            f'"always" saves: [cyan]allow {escape(request.rule)}[/cyan]'
        )
        self.console.print(Panel(body, title="approve this tool call?", border_style="yellow"))
        answer = self.prompt("[o]nce, [a]lways, [d]eny").strip().lower()[:1]
        if answer == "a":
            try:
                where = self.add_rule("allow", request.rule)
                self.console.print(f"saved [cyan]allow {escape(request.rule)}[/cyan] to {where}")
            except Exception as exc:  # the answer still stands for this run
                self.console.print(f"[red]could not save the rule: {escape(str(exc))}[/red]")
            return "always"
        return "once" if answer == "o" else "deny"


class AutoApprover:
    """``--yes``: approves every "ask" once; a deny rule still denies (it is never asked)."""

    name = "--yes"

    def __init__(self, yes: bool = True) -> None:
        self.yes = yes

    def ask(self, request: ApprovalRequest) -> Answer:
        return "once" if self.yes else "deny"


class DenyApprover:
    """No one to ask (no terminal, ``--json``): every "ask" becomes a refusal."""

    name = "no one to ask"

    def ask(self, request: ApprovalRequest) -> Answer:
        return "deny"


def choose_approver(
    yes: bool = False, json_output: bool = False, console: Console | None = None
) -> Approver:
    """``--yes`` wins; otherwise a terminal prompt if there is a terminal, else deny."""
    if yes:
        return AutoApprover()
    if json_output or not sys.stdin.isatty():
        return DenyApprover()
    return TerminalApprover(console)
