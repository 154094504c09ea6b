"""What the web page's /ops shows, gathered with the commands' own functions.

Each section is what one command prints: `agent pairing list`, `agent skills list`,
`agent cron list` and `agent cron log`, `agent usage` (by day) and `agent doctor`. The
files are read again on every page load, so the page shows them as they are now.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from agent.usage import read_usage
from cli.config import Settings
from cli.cron_cmd import job_status, run_when, store_for
from cli.doctor_cmd import doctor_checks
from cli.gateway_cmd import access_list
from cli.pairing_cmd import local_time
from cli.skills_cmd import Skills, skill_rows
from cli.usage_cmd import By, row_figures, summarise
from connectors.web.ops import RowAction, Section, guarded

RECENT_RUNS = 20


def ops_sections(settings: Settings) -> list[Section]:
    """Every section of the page, each on its own: one that fails says why, the rest show."""
    parts: list[tuple[str, str, Callable[[Settings], Section]]] = [
        ("pairing", "Pairing", pairing),
        ("skills", "Skills", skills),
        ("jobs", "Scheduled jobs", jobs),
        ("job-runs", "Recent job runs", job_runs),
        ("usage", "Usage per day", usage),
        ("doctor", "Sandbox (agent doctor)", doctor),
    ]
    return [guarded(id, title, partial(build, settings)) for id, title, build in parts]


def pairing(settings: Settings) -> Section:
    """Owners, paired users and codes waiting, as `agent pairing list` shows them."""
    access = access_list(settings)
    rows = [[user, "", "", "owner"] for user in sorted(access.owners)]
    pending = access.pending()
    rows += [[p.code, f"{p.name} ({p.user})", local_time(p.created), "waiting"] for p in pending]
    paired = sorted(access.paired().items())
    rows += [
        [user, str(info.get("name", "")), local_time(float(info.get("since", 0))), "paired"]
        for user, info in paired
    ]
    actions: list[list[RowAction]] = [[] for _ in access.owners]
    actions += [
        [
            RowAction("pairing-approve", p.code, f"approve {p.code}"),
            RowAction("pairing-deny", p.code, f"deny {p.code}"),
        ]
        for p in pending
    ]
    actions += [[] for _ in paired]
    return Section(
        "pairing",
        "Pairing",
        ["code / user", "name", "since", "state"],
        rows,
        empty="no owners, no paired users and no codes waiting",
        actions=actions,
    )


def skills(settings: Settings) -> Section:
    """Installed skills with their status and manifest, as `agent skills list`/`info` show."""
    rows, problems = skill_rows(Skills(settings))
    return Section(
        "skills",
        "Skills",
        ["skill", "status", "from", "description", "permissions"],
        [
            [r.skill.name, r.status, r.skill.source, r.skill.description, "\n".join(r.permissions)]
            for r in rows
        ],
        empty="no skills",
        notes=[f"not loaded: {p}" for p in problems],
        actions=[
            [RowAction("skill-approve", r.skill.name, f"approve {r.skill.name}")]
            if r.status.startswith(("new", "changed"))
            else []
            for r in rows
        ],
    )


def jobs(settings: Settings) -> Section:
    """The scheduled jobs and their last outcomes, as `agent cron list` shows them."""
    store = store_for(settings)
    rows, actions = [], []
    for job in store.jobs():
        state, outcome = job_status(settings, store, job)
        rows.append([job.id, job.name, job.schedule, state, job.deliver, outcome])
        if job.paused:
            actions.append([RowAction("job-resume", job.id, f"resume {job.name}")])
        else:
            actions.append([RowAction("job-pause", job.id, f"pause {job.name}")])
    return Section(
        "jobs",
        "Scheduled jobs",
        ["id", "name", "schedule", "state", "to", "last run"],
        rows,
        empty="no jobs: add one with `agent cron add WHEN PROMPT`",
        actions=actions,
    )


def job_runs(settings: Settings) -> Section:
    """The last runs of every job, as `agent cron log` shows them."""
    records = store_for(settings).runs(None, limit=RECENT_RUNS)
    return Section(
        "job-runs",
        "Recent job runs",
        ["job", "trigger", "due", "state", "run", "why"],
        [[r.job_id, r.trigger, run_when(settings, r), r.state, r.run_id, r.why] for r in records],
        empty="no job has run yet",
    )


def usage(settings: Settings) -> Section:
    """Tokens, time and cost per day, as `agent usage` sums them."""
    runs = read_usage(settings.traces_dir, None)
    rows = [[row.key, *row_figures(row)] for row in summarise(runs, By.day, settings)]
    return Section(
        "usage",
        "Usage per day",
        ["day", "runs", "steps", "prompt", "cached", "completion", "time", "cost"],
        rows if runs else [],
        empty="no runs yet: every run leaves a trace",
    )


def doctor(settings: Settings) -> Section:
    """What the sandbox enforces here, as `agent doctor` reports it."""
    results = doctor_checks(settings)
    missing = [c.name for c in results if not c.holds]
    return Section(
        "doctor",
        "Sandbox (agent doctor)",
        ["", "guarantee", "detail"],
        [["ok" if c.holds else "NO", c.name, c.detail] for c in results],
        notes=[f"not enforced here: {', '.join(missing)} (see docs/sandbox.md)"] if missing else [],
    )
