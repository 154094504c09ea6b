"""The one kind of rich console clawloop prints with: text it did not write cannot steer the
terminal.

Every segment of text is passed through :func:`agent.terminal_text.terminal_safe` as the
console renders it; the styling codes rich itself adds come from styles and control segments,
never from the text, so colours still work. Printers also call ``terminal_safe`` on the text
they quote (for ``typer.echo``, JSON lines and logging, which bypass rich); this is the net
under all of them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment

from agent.terminal_text import terminal_safe


class SafeConsole(Console):
    """A rich console that shows control characters in text instead of sending them."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        safe = (
            seg if seg.control else Segment(terminal_safe(seg.text), seg.style, seg.control)
            for seg in buffer
        )
        return super()._render_buffer(safe)


def make_console(**options: Any) -> Console:
    """A :class:`SafeConsole` (``highlight`` off unless asked)."""
    options.setdefault("highlight", False)
    return SafeConsole(**options)


class SafeFormatter(logging.Formatter):
    """A log formatter whose lines cannot steer the terminal (a warning may quote a file name
    a command chose)."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal_safe(super().format(record))


def install_safe_logging() -> None:
    """Give the handlers that write warnings to the terminal a :class:`SafeFormatter`.

    With no handler configured Python writes warnings through ``logging.lastResort``; the
    root logger's own handlers (``--debug`` set-ups, say) get the same formatter.
    """
    handlers = [logging.lastResort, *logging.getLogger().handlers]
    for handler in handlers:
        if handler is not None and isinstance(handler, logging.StreamHandler):
            fmt = handler.formatter
            handler.setFormatter(SafeFormatter(fmt._fmt if fmt else None))
