"""`agent cron`: scheduled jobs: add, list, remove, pause, run now, and run what is due."""

from __future__ import annotations

import asyncio
import datetime as dt
import signal
from typing import Annotated

import typer

from agent.errors import UserError
from cli.config import Settings, load_settings
from cli.console import SafeConsole
from cli.cron_jobs import LoopHolder, unattended_executor
from connectors.cron.clock import clock_from_env
from connectors.cron.schedule import parse_schedule, zone
from connectors.cron.scheduler import Scheduler, SchedulerBusy
from connectors.cron.store import Job, JobStore, RunRecord

cron_app = typer.Typer(
    help="Scheduled jobs: a prompt run on a schedule, its answer sent to a chat or printed.",
    no_args_is_help=True,
)

DeliverOpt = Annotated[
    str,
    typer.Option(
        "--deliver", help="Where the answer goes: telegram:CHAT, discord:CHANNEL or terminal."
    ),
]
MissedOpt = Annotated[
    str,
    typer.Option(
        "--missed",
        help="A run missed while no scheduler ran: run-once (run it once, late) or skip.",
    ),
]
NameOpt = Annotated[
    str | None, typer.Option("--name", help="A name for the job (default: its id).")
]
QuietOpt = Annotated[
    bool,
    typer.Option(
        "--quiet",
        help="A heartbeat: the model replies NOTHING when there is nothing to report, and then "
        "nothing is sent.",
    ),
]
IdArg = Annotated[str, typer.Argument(help="The job's id or name (see `agent cron list`).")]


def store_for(settings: Settings) -> JobStore:
    """The data folder's job store."""
    return JobStore(settings.data_dir / "cron" / "jobs.sqlite")


def scheduler_for(settings: Settings, store: JobStore, holder: LoopHolder) -> Scheduler:
    """The scheduler over ``store``: jobs run unattended, answers printed."""
    return Scheduler(
        store,
        clock_from_env(),
        unattended_executor(settings, holder, typer.echo),
        zone(settings.cron.timezone),
        dt.timedelta(minutes=settings.cron.grace_minutes),
    )


def _local(settings: Settings, when: dt.datetime | None) -> str:
    if when is None:
        return "-"
    return when.astimezone(zone(settings.cron.timezone)).strftime("%Y-%m-%d %H:%M %Z")


def job_status(settings: Settings, store: JobStore, job: Job) -> tuple[str, str]:
    """A job's state (paused, or its next run) and its last run's outcome, as `list` shows."""
    last = store.runs(job.id, limit=1)
    outcome = f"{last[0].state} {_local(settings, last[0].scheduled_for)}" if last else "never"
    state = "paused" if job.paused else f"next {_local(settings, job.next_due)}"
    return state, outcome


def run_when(settings: Settings, record: RunRecord) -> str:
    """When a logged run was due, in the configured time zone."""
    return _local(settings, record.scheduled_for)


def _check_deliver(deliver: str) -> str:
    platform, _, target = deliver.partition(":")
    if deliver == "terminal" or (platform in ("telegram", "discord") and target):
        return deliver
    raise UserError(f"--deliver {deliver!r}: use telegram:CHAT_ID, discord:CHANNEL_ID or terminal")


@cron_app.command("add")
def add(
    when: Annotated[
        str,
        typer.Argument(
            help="A cron expression ('0 8 * * *') or 'every 15m', 'every day at 08:00'."
        ),
    ],
    prompt: Annotated[str, typer.Argument(help="What the agent is asked each time.")],
    deliver: DeliverOpt = "terminal",
    missed: MissedOpt = "run-once",
    name: NameOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Add a job; prints its id and when it first runs (in the [cron] timezone)."""
    settings = load_settings()
    if missed not in ("run-once", "skip"):
        raise UserError(f"--missed {missed!r}: use run-once or skip")
    schedule = parse_schedule(when, zone(settings.cron.timezone))
    now = clock_from_env().now().replace(second=0, microsecond=0)  # intervals from a whole minute
    store = store_for(settings)
    job = Job(
        id="",
        name=name or "",
        schedule=when,
        prompt=prompt,
        deliver=_check_deliver(deliver),
        missed=missed,  # type: ignore[arg-type]  # checked above
        quiet=quiet,
        paused=False,
        anchor=now,
        next_due=schedule.next_after(now, now),
        created=now,
    )
    job = store.add(job)
    typer.echo(f"added {job.id} ({job.name}): next run {_local(settings, job.next_due)}")


@cron_app.command("list")
def list_jobs() -> None:
    """List the jobs: id, name, schedule, next run, target, and the last run's outcome."""
    settings = load_settings()
    store = store_for(settings)
    jobs = store.jobs()
    if not jobs:
        typer.echo("no jobs: add one with `agent cron add WHEN PROMPT`")
        return
    console = SafeConsole(highlight=False)
    for job in jobs:
        state, outcome = job_status(settings, store, job)
        console.print(
            f"{job.id}  {job.name}  [{job.schedule}]  {state}  → {job.deliver}  "
            f"last: {outcome}{'  (quiet)' if job.quiet else ''}",
            markup=False,
            soft_wrap=True,
        )


@cron_app.command("rm")
def remove(job_id: IdArg) -> None:
    """Remove a job (its run log is kept)."""
    store = store_for(load_settings())
    job = store.find(job_id)
    store.remove(job.id)
    typer.echo(f"removed {job.id} ({job.name})")


@cron_app.command("pause")
def pause(job_id: IdArg) -> None:
    """Stop running a job until it is resumed."""
    typer.echo(pause_job(load_settings(), job_id))


@cron_app.command("resume")
def resume(job_id: IdArg) -> None:
    """Run a paused job again from its next slot (slots while paused are not made up)."""
    typer.echo(resume_job(load_settings(), job_id))


def pause_job(settings: Settings, key: str) -> str:
    """Pause the job with id or name ``key``; returns what was done, in one line."""
    store = store_for(settings)
    job = store.find(key)
    store.set_paused(job.id, True, job.next_due)
    return f"paused {job.id} ({job.name})"


def resume_job(settings: Settings, key: str) -> str:
    """Resume the job with id or name ``key`` from its next slot; returns what was done."""
    store = store_for(settings)
    job = store.find(key)
    now = clock_from_env().now()
    next_due = parse_schedule(job.schedule, zone(settings.cron.timezone)).next_after(
        now, job.anchor
    )
    store.set_paused(job.id, False, next_due)
    return f"resumed {job.id} ({job.name}): next run {_local(settings, next_due)}"


@cron_app.command("run")
def run_now(job_id: IdArg) -> None:
    """Run a job once now, unattended (asks are refused); exit code 1 if it failed."""
    settings = load_settings()
    store = store_for(settings)
    job = store.find(job_id)
    scheduler = scheduler_for(settings, store, LoopHolder(settings))
    record = asyncio.run(scheduler.run_now(job))
    _report(settings, [record])
    raise typer.Exit(0 if record.state in ("done", "skipped") else 1)


@cron_app.command("tick")
def tick() -> None:
    """Run the jobs that are due, then exit: for a systemd timer or crontab without a gateway."""
    settings = load_settings()
    store = store_for(settings)
    scheduler = scheduler_for(settings, store, LoopHolder(settings))
    try:
        records = asyncio.run(scheduler.tick())
    except SchedulerBusy as busy:
        typer.echo(f"nothing run: {busy.message}")
        return
    _report(settings, records)


@cron_app.command("serve")
def serve() -> None:
    """Run jobs as they come due, in the foreground, without chats, until SIGINT or SIGTERM."""
    settings = load_settings()
    store = store_for(settings)
    scheduler = scheduler_for(settings, store, LoopHolder(settings))
    asyncio.run(_serve(scheduler))


async def _serve(scheduler: Scheduler) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await scheduler.serve(stop)


@cron_app.command("log")
def show_log(
    job_id: Annotated[str | None, typer.Argument(help="Only this job's runs.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="The last N runs.")] = 20,
) -> None:
    """The run log: each scheduled (or manual) run, its outcome, why, and its trace's run id."""
    settings = load_settings()
    store = store_for(settings)
    key = store.find(job_id).id if job_id else None
    _report(settings, store.runs(key, limit=limit))


def _report(settings: Settings, records: list[RunRecord]) -> None:
    console = SafeConsole(highlight=False)
    for r in records:
        why = f"  {r.why}" if r.why else ""
        console.print(
            f"{r.job_id}  {r.trigger}  {run_when(settings, r)}  {r.state}  run {r.run_id}{why}",
            markup=False,
            soft_wrap=True,
        )
