"""The changes the web page's /ops makes, each done by the function its command uses.

`agent pairing approve/deny`, `agent skills approve` (the person clicked after reading the
manifest the page shows, as they would answer the command's question) and
`agent cron pause/resume`, with the settings `agent web` (or `agent gateway`) started with.
"""

from __future__ import annotations

import io

from rich.console import Console

from agent.errors import UserError
from cli.config import Settings
from cli.cron_cmd import pause_job, resume_job
from cli.gateway_cmd import access_list
from cli.skills_cmd import Skills, approve
from connectors.web.ops import Action


def ops_act(settings: Settings, action: Action, target: str) -> str:
    """Do ``action`` to ``target``; returns what was done, in one line."""
    if action == "pairing-approve":
        return f"paired {access_list(settings).approve(target)}"
    if action == "pairing-deny":
        return f"denied {access_list(settings).deny(target)}"
    if action == "skill-approve":
        return approve_skill(settings, target)
    if action == "job-pause":
        return pause_job(settings, target)
    if action == "job-resume":
        return resume_job(settings, target)
    raise UserError(f"no such change: {action}")  # the page only sends the ones above


def approve_skill(settings: Settings, name: str) -> str:
    """`agent skills approve NAME --yes`; returns its last line ("approved NAME", ...)."""
    out = io.StringIO()
    approve(Skills(settings), name, Console(file=out, width=200), lambda _question: True)
    lines = [line.strip() for line in out.getvalue().splitlines() if line.strip()]
    return lines[-1] if lines else f"approved {name}"
