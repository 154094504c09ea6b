"""Reading a fetched message: headers, a readable text body, and its attachments.

A multipart message gives its text/plain part, or its HTML part turned into text; attachments
are listed by name and size, never opened. A malformed message still gives what can be read,
with a note saying what is wrong with it.
"""

from __future__ import annotations

import email
import email.policy
import html
import re
from email.message import EmailMessage, Message

HEADERS = ("From", "To", "Cc", "Date", "Subject", "Message-ID")
MAX_BODY_CHARS = 20_000


def parse(raw: bytes) -> EmailMessage:
    """The message, parsed leniently (a broken header or part is a defect, not an error)."""
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(message, EmailMessage)  # policy.default always builds EmailMessage
    return message


def header(message: Message, name: str) -> str:
    """One header as text, or "" (an undecodable header is shown raw)."""
    try:
        value = message.get(name)
    except Exception:  # a header the parser cannot even decode
        value = message.get_all(name, failobj=[""])[0] if message.get_all(name) else None
    return " ".join(str(value).split()) if value is not None else ""


def text_body(message: EmailMessage) -> str:
    """The readable text: the plain part, else the HTML part as text."""
    part = _first(message, "text/plain") or _first(message, "text/html")
    if part is None:
        return "(no text body)"
    text = _content(part)
    if part.get_content_type() == "text/html":
        text = html_to_text(text)
    text = text.strip()
    if len(text) > MAX_BODY_CHARS:
        text = text[:MAX_BODY_CHARS] + f"\n[body cut at {MAX_BODY_CHARS} characters]"
    return text or "(empty body)"


def attachments(message: EmailMessage) -> list[tuple[str, int]]:
    """``(file name, size in bytes)`` for each attachment."""
    found = []
    for part in message.walk():
        if part.is_multipart():
            continue
        name = part.get_filename()
        if name is None and part.get_content_disposition() != "attachment":
            continue
        payload = part.get_payload(decode=True)
        size = len(payload) if isinstance(payload, bytes) else 0
        found.append((name or "(unnamed)", size))
    return found


def problems(message: EmailMessage) -> list[str]:
    """What is malformed about the message, for a note the model reads."""
    seen: list[str] = []
    for part in message.walk():
        for defect in getattr(part, "defects", []):
            text = type(defect).__name__
            if text not in seen:
                seen.append(text)
    return seen


def html_to_text(markup: str) -> str:
    """Rough HTML to text: scripts and styles dropped, block tags to line breaks, entities."""
    markup = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", markup)
    markup = re.sub(r"(?i)<br\s*/?>|</(p|div|tr|li|h[1-6])>", "\n", markup)
    markup = re.sub(r"<[^>]+>", "", markup)
    text = html.unescape(markup)
    return re.sub(r"\n\s*\n+", "\n\n", re.sub(r"[ \t]+", " ", text))


def _first(message: EmailMessage, content_type: str) -> EmailMessage | None:
    for part in message.walk():
        if part.is_multipart() or part.get_content_type() != content_type:
            continue
        if part.get_content_disposition() == "attachment":
            continue
        assert isinstance(part, EmailMessage)  # parts of an EmailMessage are EmailMessages
        return part
    return None


def _content(part: EmailMessage) -> str:
    try:
        content = part.get_content()
    except (LookupError, ValueError, AttributeError):
        # An unknown charset or a broken transfer encoding: decode what is there.
        payload = part.get_payload(decode=True)
        return payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    return content if isinstance(content, str) else content.decode("utf-8", "replace")
