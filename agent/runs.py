"""Starting runs of one loop, each with its trace written to the traces folder as it goes.

What the front end knows and the loop does not (prices, budgets, memory, the workspace) is
handed over once, when a :class:`TracedRuns` is built (``cli.wiring.traced_runs``). A chat
gateway or the web chat is given one and starts traced runs itself, without calling back into
the code that wired it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.budget import BudgetLimits
from agent.events import Event
from agent.loop import AgentLoop
from agent.messages import UserMessage
from agent.run_context import RunContext
from agent.session import Session
from agent.trace import TraceWriter, traced


def _kept(text: str) -> str:
    return text


@dataclass
class TracedRuns:
    """Runs ``loop`` on a session and a task, writing the run's trace into ``traces_dir``.

    ``redact`` scrubs every trace line; ``budgets`` gives each run its chat's token budget;
    ``fresh_prompt`` rewrites the system prompt a new session starts with (the memory as it is
    now); ``details`` is what the trace's first line says about the setting (workspace,
    profile, prices, and the ``adapter`` when the backend cannot say which it runs with).
    """

    loop: AgentLoop
    traces_dir: Path
    backend: str
    model: str | None = None
    redact: Callable[[str], str] = _kept
    budgets: BudgetLimits | None = None
    fresh_prompt: Callable[[str], str] | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def run(
        self,
        session: Session,
        task: str,
        extra: dict[str, Any] | None = None,
        context: RunContext | None = None,
    ) -> Iterator[Event]:
        """``loop.run`` with its trace; ``extra`` goes into the trace's first line.

        The first line names the session, the chat (``extra["chat"]``) and the setting, so that
        usage can be summed from the traces alone; the run gets its chat's token budget.
        """
        loop = self.loop
        context = context or RunContext(cancel=loop.cancel)
        chat = (extra or {}).get("chat")
        if context.budget is None and self.budgets is not None:
            context.budget = self.budgets.budget(chat if isinstance(chat, str) else None)
        fresh = not any(m.role == "system" for m in session.messages)
        if fresh and loop.system_prompt is not None and self.fresh_prompt is not None:
            loop.system_prompt = self.fresh_prompt(loop.system_prompt)
        details = dict(self.details)
        if hasattr(loop.backend, "adapter"):  # a local backend knows what it really runs with
            found = loop.backend.adapter
            details["adapter"] = str(found) if found is not None else None
        writer = TraceWriter(self.traces_dir, context.run_id, self.redact)

        def start() -> None:
            writer.start(
                prompt=loop.prompt_label,
                backend=getattr(loop.backend, "name", self.backend),
                model=self.model,
                messages=session.window(),
                tools=loop.toolbox.specs(),
                extra={
                    # The worked examples sent after the system prompt in every request.
                    "examples": [
                        m.to_record()
                        for m in loop.examples_for([*session.window(), UserMessage(content=task)])
                    ],
                    "task": task,
                    **details,
                    "session": session.path.stem if session.path is not None else None,
                    **(extra or {}),
                },
            )

        return traced(loop.run(session, task, context), writer, start)
