"""What the IMAP and SMTP clients share before and while they connect: the password a tool call
needs, and a network failure put in a few words for the model."""

from __future__ import annotations

import socket
from collections.abc import Mapping

from agent.errors import ToolError, UserError
from skills.mail.config import MailAccount


def tool_password(account: MailAccount, environ: Mapping[str, str]) -> str:
    """The account's password; one that is not set up is a ToolError that says to tell the user."""
    try:
        return account.password(environ)
    except UserError as exc:
        raise ToolError(f"mail is not set up: {exc.message}. Tell the user.") from None


def why(exc: BaseException) -> str:
    """Why a connection failed, in a few words ("timed out", "Connection refused")."""
    if isinstance(exc, socket.timeout):
        return "timed out"
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
