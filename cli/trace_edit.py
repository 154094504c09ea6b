"""`agent traces fix ID --edit`: correct a run's conversation by hand and keep it as a new run.

The conversation is written as JSON to a temporary file and opened in ``$EDITOR`` (``$VISUAL``
first, ``vi`` last). What comes back is checked before anything is stored: valid messages, every
tool result right after its call, only tools the run had, arguments that are JSON objects, and
an assistant answer at the end. It is then written as a new trace (the records a real run
writes), graded good by ``fix`` and linked to the original, which is marked as fixed.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from agent.errors import UserError
from agent.events import FinalEvent, StepEvent, ToolCallEvent, ToolResultEvent
from agent.messages import AssistantMessage, ToolMessage, parse_message
from agent.run_context import new_run_id
from agent.trace import Trace, TraceWriter, grade_trace, mark_fixed
from cli.trace_export import messages_of, problem
from skills.simple import ANSWER_TOOL

GRADER = "fix"
Editor = Callable[[Path], None]


def document(trace: Trace) -> dict[str, Any]:
    """What the editor shows: the run's messages and the tools it was offered."""
    messages, _ = messages_of(trace)
    return {"messages": messages, "tools": trace.start.get("tools") or []}


def run_editor(path: Path) -> None:
    """Open ``path`` in the person's editor and wait for it to close."""
    command = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        done = subprocess.run([*shlex.split(command), str(path)], check=False)
    except FileNotFoundError:
        raise UserError(f"editor {command!r} not found: set $EDITOR to your editor") from None
    if done.returncode != 0:
        raise UserError(f"the editor {command!r} exited with {done.returncode}: nothing was kept")


def edit_problem(edited: Any, tools: list[dict[str, Any]]) -> str | None:
    """Why an edited conversation cannot be stored, or None."""
    if not isinstance(edited, dict) or not isinstance(edited.get("messages"), list):
        return 'the file must hold a JSON object with a "messages" list'
    messages = edited["messages"]
    why = problem({"messages": messages})
    if why is not None:
        return why
    names = {t.get("function", {}).get("name") for t in tools}
    for index, raw in enumerate(messages):
        message = parse_message(raw)
        for call in getattr(message, "tool_calls", None) or []:
            name = call.function.name
            if name not in names:
                known = ", ".join(sorted(n for n in names if n)) or "none"
                return f"message {index} calls {name!r}, a tool the run did not have ({known})"
            try:
                arguments = json.loads(call.function.arguments or "{}")
            except json.JSONDecodeError:
                return f"message {index}: the arguments of {name!r} are not valid JSON"
            if not isinstance(arguments, dict):
                return f"message {index}: the arguments of {name!r} must be a JSON object"
    if _answer(parse_message(messages[-1])) is None:
        return f"the last message must be the assistant's answer (text, or one {ANSWER_TOOL} call)"
    return None


def _answer(message: Any) -> str | None:
    """The final answer a message gives, or None if it is not a final answer."""
    if not isinstance(message, AssistantMessage):
        return None
    calls = message.tool_calls or []
    if not calls:
        return message.content or ""
    if len(calls) == 1 and calls[0].function.name == ANSWER_TOOL:
        arguments = json.loads(calls[0].function.arguments or "{}")
        return str(arguments.get("text", "")) if isinstance(arguments, dict) else None
    return None


def edit_conversation(trace: Trace, editor: Editor = run_editor) -> list[dict[str, Any]]:
    """The corrected messages, after the person edits them (asked again on a terminal while
    they do not pass the checks); a UserError if they are unchanged or invalid."""
    shown = document(trace)
    text = json.dumps(shown, ensure_ascii=False, indent=2) + "\n"
    with tempfile.TemporaryDirectory(prefix="clawloop-edit-") as tmp:
        path = Path(tmp) / f"{trace.run_id}.json"
        path.write_text(text, encoding="utf-8")
        while True:
            editor(path)
            why, edited = _read_edit(path, shown["tools"])
            if why is None:
                break
            if not (sys.stdin.isatty() and typer.confirm(f"{why}: edit again?", default=True)):
                raise UserError(f"the edited conversation is not valid ({why}): nothing was kept")
    if edited["messages"] == shown["messages"]:
        raise UserError("the conversation is unchanged: correct the turns that went wrong")
    messages: list[dict[str, Any]] = edited["messages"]
    return messages


def _read_edit(path: Path, tools: list[dict[str, Any]]) -> tuple[str | None, Any]:
    try:
        edited = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        return f"not valid JSON (line {exc.lineno}: {exc.msg})", None
    return edit_problem(edited, tools), edited


def store_edit(trace: Trace, messages: list[dict[str, Any]]) -> str:
    """Write ``messages`` as a new trace graded good by ``fix``; mark the original; its id."""
    last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    head, turns = messages[: last_user + 1], messages[last_user + 1 :]
    start = {k: v for k, v in trace.start.items() if k not in {"type", "run_id", "time"}}
    run_id = new_run_id()
    writer = TraceWriter(trace.path.parent, run_id)
    writer.write(
        {
            **start,
            "type": "start",
            "run_id": run_id,
            "messages": head,
            "fixes": trace.run_id,
            "edited": True,
        }
    )
    answer = ""
    step = 0
    for raw in turns:
        message = parse_message(raw)
        if isinstance(message, ToolMessage):
            content = str(message.content)
            ok = not content.startswith("error:")
            name = message.name or ""
            writer.event(ToolResultEvent(message.tool_call_id, name, content, ok, step=step))
            continue
        if not isinstance(message, AssistantMessage):
            continue
        step += 1
        finish = "tool_calls" if message.tool_calls else "stop"
        writer.event(StepEvent(len(head), 0, 0, 0, finish, message, step=step))
        final = _answer(message)
        if final is not None and raw is turns[-1]:
            answer = final
            continue
        for call in message.tool_calls or []:
            writer.event(ToolCallEvent(call, step=step))
    writer.event(FinalEvent(answer, step=step))
    writer.outcome("answered", answer)
    grade_trace(writer.path, "good", by=GRADER, note=f"edited by hand from {trace.run_id}")
    mark_fixed(trace.path, run_id)
    return run_id
