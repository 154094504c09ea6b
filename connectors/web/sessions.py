"""Saved sessions for the page: the list, and the messages a search found.

The page gets both from its command (see ``cli/web_sessions.py``), which reads them the way
`agent sessions list` and `agent sessions search` do; this module only names their shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One saved session: its name, first request, number of messages and last change."""

    name: str
    first: str
    messages: int
    changed: str


@dataclass(frozen=True, slots=True)
class SessionHit:
    """One message that matched a search, in the session it continues."""

    session: str
    seq: int
    role: str
    label: str  # "" for the user's own words or a trusted result; else where they came from
    excerpt: str


@dataclass(frozen=True, slots=True)
class Sessions:
    """How the page reads the sessions folder: all of it, newest first, or a search."""

    listed: Callable[[], list[SessionRow]]
    search: Callable[[str], list[SessionHit]]
