"""Showing a run in the terminal as it happens, or as one JSON event per line."""

from __future__ import annotations

import json
import sys
from typing import Protocol

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from agent.events import (
    CompactedEvent,
    ErrorEvent,
    Event,
    FinalEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
    event_to_json,
)
from agent.terminal_text import raw_output, terminal_safe
from cli.console import SafeConsole

RESULT_PREVIEW_LINES = 20


class Renderer(Protocol):
    """Consumes the loop's events."""

    def show(self, event: Event) -> None: ...

    def close(self) -> None: ...


class JsonRenderer:
    """One JSON object per line on stdout, for scripts; the final answer comes last."""

    def __init__(self) -> None:
        self._final: FinalEvent | None = None

    def show(self, event: Event) -> None:
        if isinstance(event, TokenEvent):
            return  # the streamed text arrives whole in the final event or the tool call
        if isinstance(event, FinalEvent):
            self._final = event  # held back so it is the last line, after usage
            return
        self._emit(event)

    def close(self) -> None:
        if self._final is not None:
            self._emit(self._final)

    def _emit(self, event: Event) -> None:
        sys.stdout.write(json_line(event_to_json(event)) + "\n")
        sys.stdout.flush()


class TerminalRenderer:
    """Tokens streaming, each tool call and result in its own panel, the answer, a summary."""

    def __init__(self, console: Console | None = None, session_name: str | None = None) -> None:
        self.console = console or SafeConsole(highlight=False)
        self.session_name = session_name
        self._streaming = False
        self._streamed = ""

    def show(self, event: Event) -> None:
        if isinstance(event, TokenEvent):
            if not self._streaming:
                self._streaming = True
            self._streamed += event.text
            self.console.print(Text(terminal_safe(event.text), style="dim"), end="")
            return
        self._end_stream()
        if isinstance(event, ToolCallEvent):
            args = event.call.function.arguments
            self.console.print(
                Panel(
                    Text(terminal_safe(args)),
                    title=f"tool call: {_title(event.call.function.name)}",
                    title_align="left",
                    border_style="cyan",
                )
            )
        elif isinstance(event, ToolResultEvent):
            style = "green" if event.ok else "red"
            self.console.print(
                Panel(
                    Text(terminal_safe(_preview(event.content))),
                    title=f"result: {_title(event.name)} ({event.seconds:.2f} s)",
                    title_align="left",
                    border_style=style,
                )
            )
        elif isinstance(event, FinalEvent):
            self.console.print(
                Panel(
                    Text(terminal_safe(event.content)),
                    title="answer",
                    title_align="left",
                    border_style="bold",
                )
            )
        elif isinstance(event, ErrorEvent):
            self.console.print(f"[red]✗ {_title(event.message)}[/red]")
        elif isinstance(event, CompactedEvent):
            self.console.print(
                f"[dim]compacted the conversation: {event.covered} earlier messages are now a "
                f"{event.method} summary (about {event.tokens_before} → {event.tokens_after} "
                "tokens)[/dim]"
            )
        elif isinstance(event, UsageEvent):
            session = f" · session {_title(self.session_name)}" if self.session_name else ""
            cached = f" ({event.cached_tokens} cached)" if event.cached_tokens else ""
            self.console.print(
                f"[dim]{event.steps} steps · {event.prompt_tokens} prompt tokens{cached} · "
                f"{event.completion_tokens} generated · {event.seconds:.1f} s{session}[/dim]"
            )

    def close(self) -> None:
        self._end_stream()

    def _end_stream(self) -> None:
        if self._streaming:
            if not self._streamed.endswith("\n"):
                self.console.print()
            self._streaming = False
            self._streamed = ""


def _preview(text: str) -> str:
    lines = text.splitlines()
    if len(lines) <= RESULT_PREVIEW_LINES:
        return text
    hidden = len(lines) - RESULT_PREVIEW_LINES
    return "\n".join(lines[:RESULT_PREVIEW_LINES]) + f"\n… {hidden} more lines"


def _title(text: str) -> str:
    """Text quoted inside rich markup: no markup of its own, no control characters."""
    return escape(terminal_safe(text))


def json_line(value: object) -> str:
    """One JSON value on one line; DEL, C1 controls and direction overrides written as ``\\u``
    escapes (``json.dumps`` escapes only C0), so the line is inert in a terminal and the data
    unchanged for the script reading it."""
    text = json.dumps(value, ensure_ascii=False)
    if raw_output():
        return text
    return "".join(f"\\u{ord(c):04x}" if _unsafe(c) else c for c in text)


def _unsafe(char: str) -> bool:
    code = ord(char)
    return 0x7F <= code <= 0x9F or 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069
