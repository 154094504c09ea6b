"""`agent traces list / show / grade / fix / export`: the runs the agent has made, and training
data."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from agent.errors import UserError
from agent.terminal_text import terminal_safe
from agent.trace import Trace, grade_trace, read_trace, read_traces, trace_path
from cli.config import load_settings
from cli.console import SafeConsole
from cli.trace_export import export, select, since_time

traces_app = typer.Typer(
    help="Traces of past runs: list, show, grade, fix, export.", no_args_is_help=True
)
console = SafeConsole(highlight=False)


def _folder() -> Path:
    return load_settings().traces_dir


def _all(folder: Path) -> list[Trace]:
    return read_traces(folder)


@traces_app.command("list")
def list_traces(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Newest N traces.")] = 20,
) -> None:
    """The newest traces: id, time, outcome, grade, steps and the task."""
    traces = _all(_folder())[-limit:]
    if not traces:
        console.print("no traces yet: every `agent run` leaves one")
        return
    table = Table()
    for column in ("id", "started", "prompt", "outcome", "grade", "steps", "task"):
        table.add_column(column)
    for t in traces:
        start, outcome = t.start, t.outcome or {}
        table.add_row(
            t.run_id,
            str(start.get("time", ""))[:19],
            str(start.get("prompt", "")),
            str(outcome.get("outcome", "interrupted")),
            ", ".join(x for x in (t.grade, t.fixed_by and f"fixed by {t.fixed_by}") if x),
            str(len(t.of_type("step"))),
            escape(str(start.get("task", ""))[:60]),
        )
    console.print(table)


RunIdArg = Annotated[str, typer.Argument(help="A run id (a unique prefix will do).")]


@traces_app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(help="A run id (a unique prefix will do).")],
) -> None:
    """One run as a timeline: each model step, tool call, decision and result."""
    trace = read_trace(trace_path(_folder(), run_id))
    start = trace.start
    console.print(
        f"[bold]run {trace.run_id}[/bold]  prompt {start.get('prompt')}  "
        f"backend {start.get('backend')}  {start.get('time', '')}"
    )
    console.print(f"[bold]task:[/bold] {escape(terminal_safe(str(start.get('task', ''))))}")
    for record in trace.records:
        _show_record(record)


def _show_record(r: dict[str, Any]) -> None:
    kind = r.get("type")
    line = _RECORD_LINES.get(str(kind))
    if line is not None:
        console.print(f"[dim]{str(r.get('time', ''))[11:23]}[/dim] {line(r)}")
    if kind == "step" and r.get("raw_text") is not None:
        console.print(f"    [dim]raw:[/dim] {escape(terminal_safe(r['raw_text'][:400]))}")
    if kind == "step" and r.get("parse_error"):
        console.print(f"    [red]unreadable call:[/red] {escape(terminal_safe(r['parse_error']))}")


def _step_line(r: dict[str, Any]) -> str:
    rate = f", {r['tokens_per_s']:.0f} tok/s" if r.get("tokens_per_s") else ""
    ttft = f", first token {r['ttft_s'] * 1000:.0f} ms" if r.get("ttft_s") is not None else ""
    return (
        f"[cyan]step {r.get('step')}[/cyan] {r.get('messages')} messages, "
        f"{r.get('prompt_tokens')} prompt tokens ({r.get('cached_tokens')} cached), "
        f"{r.get('completion_tokens')} generated{ttft}{rate}, finish {r.get('finish_reason')}"
    )


def _call_line(r: dict[str, Any]) -> str:
    fn = r["call"]["function"]
    return f"  [yellow]call[/yellow] {fn['name']}({escape(fn['arguments'][:200])})"


def _result_line(r: dict[str, Any]) -> str:
    mark = "[green]ok[/green]" if r.get("ok") else "[red]error[/red]"
    who = ""
    if r.get("decision"):
        who = f" [dim]{r['decision']} by {escape(str(r.get('decided_by')))}[/dim]"
    return f"  {mark}{who} {r.get('seconds', 0):.2f} s: {escape(r['content'][:300])}"


_RECORD_LINES: dict[str, Callable[[dict[str, Any]], str]] = {
    "step": _step_line,
    "tool_call": _call_line,
    "tool_result": _result_line,
    "final": lambda r: f"[bold green]answer:[/bold green] {escape(r['content'])}",
    "error": lambda r: f"[bold red]stopped ({r.get('reason')}):[/bold red] {escape(r['message'])}",
    "outcome": lambda r: f"outcome: {r.get('outcome')}",
    "grade": lambda r: (
        f"graded [bold]{r.get('grade')}[/bold] by {r.get('by')} {escape(r.get('note', ''))}"
    ),
}


@traces_app.command("grade")
def grade(
    run_id: RunIdArg,
    verdict: Annotated[str, typer.Argument(metavar="good|bad", help="Did the run do the task?")],
    note: Annotated[str, typer.Option("--note", help="Why.")] = "",
) -> None:
    """Grade a run good or bad; graded runs become training data."""
    path = trace_path(_folder(), run_id)
    grade_trace(path, verdict, by="user", note=note)
    console.print(f"graded {path.stem} {verdict}")


@traces_app.command("fix")
def fix(
    run_id: Annotated[
        str | None,
        typer.Argument(help="A run id (a unique prefix will do); with --failed, leave it out."),
    ] = None,
    script: Annotated[
        Path | None,
        typer.Option(
            "--script",
            help="A JSON list of the corrected assistant turns (the fake backend's format).",
        ),
    ] = None,
    edit: Annotated[
        bool, typer.Option("--edit", help="Correct the conversation by hand in $EDITOR.")
    ] = False,
    search: Annotated[
        bool,
        typer.Option(
            "--search",
            help="For a run of `agent eval`: try the tools its request offered, with values "
            "from the request, and keep the first call that passes the task's check.",
        ),
    ] = False,
    failed: Annotated[
        bool,
        typer.Option(
            "--failed",
            help="With --search: every failed run of `agent eval` not fixed yet.",
        ),
    ] = False,
    family: Annotated[
        list[str] | None,
        typer.Option("--family", help="With --failed: only runs of this task family."),
    ] = None,
    keep: Annotated[
        int,
        typer.Option("--keep", min=0, help="With --script: replay the run's first N turns first."),
    ] = 0,
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            "-w",
            help="With --script, for a run not from `agent eval`: replay here "
            "(default: a fresh empty folder).",
        ),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Approve calls that would ask in --workspace.")
    ] = False,
) -> None:
    """Correct a failed run: store the right run as a new trace graded good, linked to it.

    With --script, the corrected turns replay the run's task through the real loop, skills and
    sandbox; a run of `agent eval` runs again in a fresh workspace built from its task and must
    pass the task's check. With --edit, the conversation opens in $EDITOR as JSON and is checked
    when saved. With --search, clawloop finds the turns: one call of a tool the run was offered,
    answered with its result, that passes the task's check. The original run is marked as fixed;
    `agent traces export` includes the fix.
    """
    if (script is not None) + edit + search != 1:
        raise UserError("give one of --script TURNS.json, --edit or --search")
    if failed:
        if not search or run_id is not None:
            raise UserError("--failed fixes runs by search: `agent traces fix --failed --search`")
        _fix_failed(family)
        return
    if run_id is None:
        raise UserError("give the id of the run to fix (`agent traces list` shows them)")
    settings = load_settings()
    path = trace_path(settings.traces_dir, run_id)
    trace = read_trace(path)
    if trace.fixed_by:
        console.print(f"[dim]{trace.run_id} was fixed before, by {trace.fixed_by}[/dim]")
    if script is not None or search:
        from backends.fake import FakeBackend
        from cli.trace_fix import fix_by_script, fix_by_search

        if search:
            fixed = fix_by_search(settings, trace)
        else:
            assert script is not None
            turns = [t for t in FakeBackend.from_file(script).turns if not callable(t)]
            fixed = fix_by_script(settings, trace, turns, keep, workspace, yes)
        how = "passes its task's check" if fixed.checked else "answered"
        console.print(f"fixed {trace.run_id}: run {fixed.run_id} {how}, graded good")
        return
    from cli.trace_edit import edit_conversation, store_edit

    new_id = store_edit(trace, edit_conversation(trace))
    console.print(f"fixed {trace.run_id}: run {new_id} stored from your edit, graded good")


def _fix_failed(families: list[str] | None) -> None:
    """Search for a fix to every failed, unfixed run of `agent eval` (of ``families``)."""
    from cli.trace_fix import fix_by_search

    settings = load_settings()
    todo = [
        t
        for t in read_traces(settings.traces_dir)
        if t.start.get("eval_task")
        and t.grade == "bad"
        and not t.fixed_by
        and (not families or t.start.get("family") in families)
    ]
    fixed = 0
    for trace in todo:
        try:
            new = fix_by_search(settings, trace)
        except UserError as exc:
            console.print(f"[dim]{trace.run_id}: {escape(str(exc))}[/dim]")
            continue
        fixed += 1
        console.print(f"fixed {trace.run_id}: run {new.run_id} passes its task's check")
    console.print(f"{fixed} of {len(todo)} failed eval runs fixed by search, graded good")


def _since(value: str | None) -> str | None:
    return since_time(value) if value is not None else None


@traces_app.command("export")
def export_cmd(
    grade_filter: Annotated[str, typer.Option("--grade", help="Export runs graded this.")] = "good",
    families: Annotated[
        list[str] | None,
        typer.Option("--family", help="Only runs of this task family; repeatable."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Only runs started since: 2026-05-01, or an age: 3d, 12h."),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="Output format.")] = "openai-chat",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """Write graded runs as chat fine-tuning data (JSONL), then a summary on stderr."""
    if fmt != "openai-chat":
        raise UserError(f"unknown export format {fmt!r}: use openai-chat")
    if grade_filter not in {"good", "bad"}:
        raise UserError(f"--grade must be good or bad, not {grade_filter!r}")
    chosen = select(_all(_folder()), families, _since(since))
    lines, summary = export(chosen, grade_filter)
    text = "".join(line + "\n" for line in lines)
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
    SafeConsole(stderr=True, highlight=False).print(summary.describe())


__all__ = ["traces_app"]
