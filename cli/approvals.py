"""Who answers "ask": the person at the terminal, ``--yes``, or no one (deny).

In a run, an ask is an ``ApprovalRequested`` event; :func:`answer_event` answers it with one of
these and sends the answer through the run's context, the same path a chat's ``/approve`` takes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.prompt import Prompt

from agent.events import ApprovalRequested
from agent.run_context import RunContext
from cli.console import SafeConsole
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
        self.console = console or SafeConsole(stderr=True)
        self.add_rule = add_rule
        self.prompt = prompt or self._ask

    def _ask(self, question: str) -> str:
        return Prompt.ask(question, choices=["o", "a", "d"], default="d", console=self.console)

    def choose(self, summary: str, reason: str, rule: str) -> Answer:
        """Show the call and read the answer; saving an "always" is left to the caller."""
        body = (
            f"[bold]{escape(summary)}[/bold]\n"
            f"why asked: {escape(reason)}\n"
            f'"always" saves: [cyan]allow {escape(rule)}[/cyan]'
        )
        self.console.print(Panel(body, title="approve this tool call?", border_style="yellow"))
        answer = self.prompt("[o]nce, [a]lways, [d]eny").strip().lower()[:1]
        return "always" if answer == "a" else "once" if answer == "o" else "deny"

    def ask(self, request: ApprovalRequest) -> Answer:
        answer = self.choose(request.describe(), request.reason, request.rule)
        if answer == "always":
            try:
                where = self.add_rule("allow", request.rule)
                self.console.print(f"saved [cyan]allow {escape(request.rule)}[/cyan] to {where}")
            except Exception as exc:  # the answer still stands for this run
                self.console.print(f"[red]could not save the rule: {escape(str(exc))}[/red]")
        return answer


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


def answer_event(event: ApprovalRequested, approver: Approver, context: RunContext) -> Answer:
    """Answer a run's ask with ``approver``, through the run's context like any front end.

    An "always" is saved by the tool itself (the run's overlay and the config file).
    """
    if isinstance(approver, TerminalApprover):
        answer = approver.choose(event.summary, event.reason, event.suggestion)
        if event.person_only and answer == "always":
            answer = "once"  # a data-flow ask is about this call's arguments: no rule to save
    elif event.person_only:
        answer = "deny"  # only a person may approve a call steered by untrusted content
    else:
        request = ApprovalRequest(event.call.function.name, "", {}, event.reason, event.suggestion)
        answer = approver.ask(request)
    context.approvals.answer(event.id, answer, approver.name)
    return answer
