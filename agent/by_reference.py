"""Untrusted results by reference: the model reads a note where a stranger's words would be.

With ``[sandbox.dataflow] untrusted_results = "reference"``, every tool result labelled
untrusted (a mail, a web page, an MCP result, a file under ``untrusted_paths``, a short-text
answer of the reader) reaches the model as a note naming where it came from, its size and its
call id, never as its text. The model learns what it needs through the quarantined reader
(``ask_about``), whose closed answers (yes/no, a choice, a number, a date) are trusted; an
instruction in the text has no way into the context that decides the calls. The session, the
trace and the user still see the whole result: only the request to the model changes, so the
same session can be continued in either mode.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from agent.messages import Message, ToolMessage

# A sender or a URL is written by the stranger too: the note keeps it short and plain.
_ORIGIN_CHARS = re.compile(r"[^A-Za-z0-9@._:/+-]")
_ORIGIN_MAX = 60


def by_reference(messages: Sequence[Message], reader: str | None) -> list[Message]:
    """``messages`` with the text of every untrusted tool result replaced by a note."""
    return [
        m.model_copy(update={"content": reference_note(m, reader)})
        if isinstance(m, ToolMessage) and m.provenance is not None and not m.provenance.trusted
        else m
        for m in messages
    ]


def reference_note(message: ToolMessage, reader: str | None) -> str:
    """What the model reads in place of an untrusted result."""
    label = message.provenance
    what = "an untrusted result"
    if label is not None:
        origin = _ORIGIN_CHARS.sub("", label.origin)[:_ORIGIN_MAX]
        what = label.model_copy(update={"origin": origin}).describe()
    note = (
        f"[Withheld: {what}, {len(message.content)} characters of untrusted text, kept out "
        "of your context.]"
    )
    if reader is None:
        return f"{note} Tell the user you cannot read it here."
    return (
        f'{note} To learn something from it, call {reader} with source "{message.tool_call_id}"'
        " and one question (yes_no, choice, number or date)."
    )
