"""Talking to an IMAP server: folders, SEARCH, FETCH, all by UID.

A message id the model sees is ``FOLDER:UID``, stable across sessions of the same mailbox.
Connection and login failures become :class:`ToolError` messages the model can act on.
"""

from __future__ import annotations

import contextlib
import imaplib
import re
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from agent.errors import ToolError
from skills.mail.config import MailAccount, ssl_context
from skills.mail.connecting import tool_password, why

_LIST_LINE = re.compile(rb'^\((?P<flags>[^)]*)\) (?P<sep>"[^"]*"|NIL) (?P<name>.+)$')


@dataclass(slots=True, frozen=True)
class MessageId:
    """Where a message lives: its folder and UID."""

    folder: str
    uid: int

    def __str__(self) -> str:
        return f"{self.folder}:{self.uid}"

    @classmethod
    def parse(cls, text: str) -> MessageId:
        folder, _, uid = text.strip().rpartition(":")
        if not folder or not uid.isdigit():
            raise ToolError(
                f"{text!r} is not a message id; use an id from mail_search, e.g. 'INBOX:12'"
            )
        return cls(folder, int(uid))


@contextlib.contextmanager
def connect(account: MailAccount, environ: Mapping[str, str]) -> Iterator[imaplib.IMAP4]:
    """A logged-in IMAP connection, closed afterwards."""
    host, port = account.imap_address()
    password = tool_password(account, environ)
    context = ssl_context(account)
    try:
        if account.imap_security == "tls":
            client: imaplib.IMAP4 = imaplib.IMAP4_SSL(
                host, port, ssl_context=context, timeout=account.timeout_s
            )
        else:
            client = imaplib.IMAP4(host, port, timeout=account.timeout_s)
            if account.imap_security == "starttls":
                client.starttls(ssl_context=context)
    except ssl.SSLError as exc:
        raise ToolError(
            f"the TLS connection to the IMAP server {host}:{port} failed ({exc.reason or exc}); "
            "its certificate is not trusted or TLS is misconfigured. Tell the user."
        ) from None
    except (OSError, imaplib.IMAP4.error) as exc:
        raise ToolError(
            f"could not reach the IMAP server {host}:{port} ({why(exc)}); the server may be "
            "down. Try again later or tell the user."
        ) from None
    try:
        try:
            client.login(account.login, password)
        except imaplib.IMAP4.error:
            raise ToolError(
                f"the IMAP server {host}:{port} rejected the login for {account.login} (wrong "
                "user name or password). Do not retry; tell the user to check the mail password."
            ) from None
        yield client
    except (OSError, imaplib.IMAP4.abort) as exc:
        raise ToolError(f"the IMAP connection to {host}:{port} broke ({why(exc)})") from None
    finally:
        with contextlib.suppress(Exception):
            client.logout()


def list_folders(client: imaplib.IMAP4) -> list[str]:
    """Every folder's name."""
    status, lines = client.list()
    _ok(status, lines, "LIST")
    names = []
    for raw in lines:
        if not isinstance(raw, bytes):
            continue
        m = _LIST_LINE.match(raw)
        if m:
            names.append(_unquote(m.group("name").decode("utf-8", "replace")))
    return names


def select(client: imaplib.IMAP4, folder: str) -> None:
    """Open ``folder`` (read-write, so reading marks messages seen, as a mail client does)."""
    status, _data = client.select(_quote(folder))
    if status != "OK":
        raise ToolError(f"there is no folder {folder!r}; use mail_list_folders to see them")


def search(client: imaplib.IMAP4, criteria: list[str]) -> list[int]:
    """UIDs matching IMAP SEARCH ``criteria`` (already quoted), oldest first."""
    text = " ".join(criteria) or "ALL"
    charset = None
    if not text.isascii():
        charset = "UTF-8"
        client._encoding = "utf-8"  # type: ignore[attr-defined]  # imaplib sends the literal as is
    status, data = client.uid("SEARCH", *(["CHARSET", charset] if charset else []), text)
    _ok(status, data, "SEARCH")
    return [int(u) for u in (data[0] or b"").split()]


def fetch(client: imaplib.IMAP4, uid: int, what: str) -> list[tuple[bytes, bytes]]:
    """``(response line, literal)`` pairs for one UID and FETCH items."""
    status, data = client.uid("FETCH", str(uid), what)
    _ok(status, data, "FETCH")
    return [(item[0], item[1]) for item in data if isinstance(item, tuple)]


def quote(value: str) -> str:
    """An IMAP quoted string."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _quote(folder: str) -> str:
    return quote(folder)


def _unquote(name: str) -> str:
    if len(name) >= 2 and name[0] == name[-1] == '"':
        return name[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return name


def _ok(status: str, data: object, command: str) -> None:
    if status != "OK":
        raise ToolError(f"the IMAP server refused {command}: {data!r}")
