"""``from:alice subject:"weekly report" since:2026-11-01 invoice`` as IMAP SEARCH criteria."""

from __future__ import annotations

import datetime as dt
import shlex

from agent.errors import ToolError
from skills.mail.imap import quote

_KEYS = {"from": "FROM", "to": "TO", "cc": "CC", "subject": "SUBJECT", "body": "BODY"}
_DATES = {"since": "SINCE", "before": "BEFORE", "on": "ON"}
HELP = (
    "write words (searched in headers and body) and any of from:, to:, cc:, subject:, body:, "
    "since:YYYY-MM-DD, before:YYYY-MM-DD, on:YYYY-MM-DD; quote values with spaces"
)


def criteria(query: str, unread_only: bool = False) -> list[str]:
    """The SEARCH keys for ``query``, all of which must match."""
    try:
        words = shlex.split(query)
    except ValueError as exc:
        raise ToolError(f"the query {query!r} cannot be read ({exc}); {HELP}") from None
    out = ["UNSEEN"] if unread_only else []
    for word in words:
        key, sep, value = word.partition(":")
        key = key.lower()
        if sep and key in _KEYS and value:
            out += [_KEYS[key], quote(value)]
        elif sep and key in _DATES:
            out += [_DATES[key], _imap_date(value)]
        elif sep and key == "is" and value.lower() in ("unread", "unseen"):
            out.append("UNSEEN")
        else:
            out += ["TEXT", quote(word)]
    return out


def _imap_date(value: str) -> str:
    try:
        day = dt.date.fromisoformat(value)
    except ValueError:
        raise ToolError(f"{value!r} is not a date; write it as YYYY-MM-DD") from None
    months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    return f"{day.day:02d}-{months[day.month - 1]}-{day.year}"
