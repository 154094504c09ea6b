"""Sending one message over SMTP (STARTTLS or implicit TLS, with login).

Every failure becomes a :class:`ToolError` the model can act on: a wrong password, a server
that is down, a certificate that does not verify, a recipient the server refuses.
"""

from __future__ import annotations

import smtplib
import socket
import ssl
from collections.abc import Mapping
from email.message import EmailMessage

from agent.errors import ToolError
from skills.mail.config import MailAccount, ssl_context
from skills.mail.connecting import tool_password, why


def send(account: MailAccount, message: EmailMessage, environ: Mapping[str, str]) -> list[str]:
    """Send ``message``; return the recipients the server accepted."""
    host, port = account.smtp_address()
    password = tool_password(account, environ)
    context = ssl_context(account)
    try:
        if account.smtp_security == "tls":
            client: smtplib.SMTP = smtplib.SMTP_SSL(
                host, port, timeout=account.timeout_s, context=context
            )
        else:
            client = smtplib.SMTP(host, port, timeout=account.timeout_s)
        with client:
            if account.smtp_security == "starttls":
                client.starttls(context=context)
            client.login(account.login, password)
            refused = client.send_message(message)
    except smtplib.SMTPAuthenticationError:
        raise ToolError(
            f"the SMTP server {host}:{port} rejected the login for {account.login} (wrong "
            "user name or password). Do not retry; tell the user to check the mail password."
        ) from None
    except smtplib.SMTPRecipientsRefused as exc:
        bad = ", ".join(exc.recipients)
        raise ToolError(
            f"the SMTP server refused every recipient ({bad}); check the addresses"
        ) from None
    except smtplib.SMTPNotSupportedError as exc:
        raise ToolError(f"the SMTP server {host}:{port} does not support this: {exc}") from None
    except ssl.SSLError as exc:
        raise ToolError(
            f"the TLS connection to {host}:{port} failed ({exc.reason or exc}); the server's "
            "certificate is not trusted or TLS is misconfigured. Tell the user."
        ) from None
    except (TimeoutError, ConnectionError, socket.gaierror, OSError) as exc:
        raise ToolError(
            f"could not reach the SMTP server {host}:{port} ({why(exc)}); the server may be "
            "down. Try again later or tell the user."
        ) from None
    except smtplib.SMTPException as exc:
        raise ToolError(f"the SMTP server {host}:{port} refused the message: {exc}") from None
    recipients = [a for a in _all_recipients(message) if a not in refused]
    return recipients


def _all_recipients(message: EmailMessage) -> list[str]:
    from email.utils import getaddresses

    fields = [str(v) for key in ("To", "Cc", "Bcc") for v in message.get_all(key, [])]
    return [addr for _name, addr in getaddresses(fields) if addr]
