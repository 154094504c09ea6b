"""`agent run` and `agent chat`: one task, or a conversation, through the agent loop."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated, Any

import typer

from agent.events import ApprovalRequested, FinalEvent
from agent.loop import AgentLoop
from agent.run_context import RunContext
from agent.session import Session
from agent.terminal_text import set_raw_output
from cli.approvals import TerminalApprover, answer_event, choose_approver
from cli.config import Settings, load_settings
from cli.console import SafeConsole
from cli.options import BackendOpt, SandboxOpt, ScriptOpt, WorkspaceOpt
from cli.render import JsonRenderer, Renderer, TerminalRenderer
from cli.wiring import build_backend, build_loop, open_session, run_traced, settings_toolbox
from skills.guard import Approver

err_console = SafeConsole(stderr=True, highlight=False)

ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="Model: a GGUF path (llamacpp, engine) or a served model name (openai).",
    ),
]
AdapterOpt = Annotated[
    str | None,
    typer.Option("--adapter", help="A GGUF LoRA adapter for llamacpp or engine (none: off)."),
]
SessionOpt = Annotated[
    str | None, typer.Option("--session", "-s", help="Continue (or start) the named session.")
]
StepsOpt = Annotated[
    int | None,
    typer.Option("--max-steps", min=1, help="Stop after this many model calls (default 12)."),
]
BudgetOpt = Annotated[
    float | None, typer.Option("--time-budget", min=0.1, help="Stop after this many seconds.")
]
JsonOpt = Annotated[
    bool,
    typer.Option("--json", help="Print one JSON event per line; the last is the final answer."),
]
YesOpt = Annotated[
    bool,
    typer.Option("--yes", "-y", help="Approve calls that would ask (never overrides a deny rule)."),
]
ModeOpt = Annotated[
    str | None,
    typer.Option(
        "--mode", help="Sandbox mode: read-only, workspace-write (default) or full-access."
    ),
]
TempOpt = Annotated[
    float | None,
    typer.Option("--temperature", min=0.0, help="Sampling temperature (0 = greedy, the default)."),
]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Sampling seed.")]
RawOpt = Annotated[
    bool,
    typer.Option(
        "--raw",
        help="Show output as it is, terminal control sequences included (default: shown as ^[).",
    ),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option("--base-url", help="Server URL for the openai backend, e.g. http://host:8000/v1."),
]


def _settings(**flags: Any) -> Settings:
    overrides = {
        "backend": "fake" if flags.get("script") else flags.get("backend"),
        "model": flags.get("model"),
        "adapter": flags.get("adapter"),
        "max_steps": flags.get("max_steps"),
        "time_budget": flags.get("time_budget"),
        "workspace": flags.get("workspace"),
        "sandbox.mode": flags.get("mode"),
        "sandbox.backend": flags.get("sandbox"),
        "decoding.temperature": flags.get("temperature"),
        "decoding.seed": flags.get("seed"),
        "backends.openai.base_url": flags.get("base_url"),
        "raw_output": True if flags.get("raw") else None,
    }
    settings = load_settings(overrides)
    set_raw_output(settings.raw_output)
    return settings


def _prepare(
    settings: Settings, script: Path | None, yes: bool, as_json: bool, watch: bool = False
) -> tuple[AgentLoop, Approver]:
    if settings.sandbox.mode == "full-access" and not as_json:
        err_console.print(
            "[bold red]full-access: tools run without the OS sandbox's limits on "
            "files and network[/bold red]"
        )
    extra: dict[str, Any] = {"script": str(script)} if script else {}
    if settings.backend == "engine":
        extra["resident"] = True  # a short-lived run: keep the engine loaded for the next one
    backend = build_backend(settings, extra or None)
    notice = (lambda text: err_console.print(f"[dim]{text}[/dim]")) if watch else None
    # No standing approver in the toolbox: every ask is an event, answered in _drive.
    toolbox = settings_toolbox(settings, None, notice, backend)
    return build_loop(settings, backend, toolbox), choose_approver(yes, as_json, err_console)


def _drive(
    settings: Settings,
    loop: AgentLoop,
    session: Session,
    task: str,
    renderer: Renderer,
    approver: Approver,
) -> bool:
    """Run one task; Ctrl-C stops it cleanly (what was said is already on disk)."""
    final = False
    previous = signal.getsignal(signal.SIGINT)
    # Only a person at a terminal attends a run; --yes, --json or no terminal do not.
    attended = isinstance(approver, TerminalApprover)
    context = RunContext(
        cancel=loop.cancel, ask_timeout_s=settings.approval_timeout, attended=attended
    )

    def interrupt(_sig: int, _frame: object) -> None:
        context.stop()

    signal.signal(signal.SIGINT, interrupt)
    try:
        for event in run_traced(settings, loop, session, task, context=context):
            renderer.show(event)
            if isinstance(event, ApprovalRequested):
                renderer.close()  # end a streamed line before the question
                answer_event(event, approver, context)
            final = final or isinstance(event, FinalEvent)
    finally:
        signal.signal(signal.SIGINT, previous)
        renderer.close()
        context.close()
        loop.cancel.clear()
    return final


def run(
    task: Annotated[str, typer.Argument(help="What the agent should do.")],
    backend: BackendOpt = None,
    model: ModelOpt = None,
    adapter: AdapterOpt = None,
    script: ScriptOpt = None,
    session: SessionOpt = None,
    max_steps: StepsOpt = None,
    time_budget: BudgetOpt = None,
    json_out: JsonOpt = False,
    yes: YesOpt = False,
    workspace: WorkspaceOpt = None,
    mode: ModeOpt = None,
    sandbox: SandboxOpt = None,
    temperature: TempOpt = None,
    seed: SeedOpt = None,
    base_url: BaseUrlOpt = None,
    raw: RawOpt = False,
) -> None:
    """Run one task to a final answer. Exit code 0 on a final answer, 1 otherwise."""
    settings = _settings(**locals())
    loop, approver = _prepare(settings, script, yes, json_out)
    name, conversation = open_session(settings, session)
    renderer: Renderer = JsonRenderer() if json_out else TerminalRenderer(session_name=name)
    ok = _drive(settings, loop, conversation, task, renderer, approver)
    raise typer.Exit(0 if ok else 1)


def chat(
    backend: BackendOpt = None,
    model: ModelOpt = None,
    adapter: AdapterOpt = None,
    script: ScriptOpt = None,
    session: SessionOpt = None,
    max_steps: StepsOpt = None,
    time_budget: BudgetOpt = None,
    yes: YesOpt = False,
    workspace: WorkspaceOpt = None,
    mode: ModeOpt = None,
    sandbox: SandboxOpt = None,
    temperature: TempOpt = None,
    seed: SeedOpt = None,
    base_url: BaseUrlOpt = None,
    raw: RawOpt = False,
) -> None:
    """Talk with the agent; the conversation is kept as a session. Type /exit or Ctrl-D to leave."""
    settings = _settings(**locals())
    loop, approver = _prepare(settings, script, yes, as_json=False, watch=True)
    name, conversation = open_session(settings, session)
    console = SafeConsole(highlight=False)
    console.print(f"[dim]session {name} · /exit to leave[/dim]")
    while True:
        try:
            line = console.input("[bold]> [/bold]")
        except (EOFError, KeyboardInterrupt):
            console.print()
            break
        if line.strip() in ("/exit", "/quit"):
            break
        if line.strip():
            _drive(settings, loop, conversation, line, TerminalRenderer(console), approver)
