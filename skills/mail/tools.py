"""The mail tools: ``mail_send``, ``mail_search``, ``mail_read``, ``mail_list_folders``.

Everything read from a mailbox (subjects, senders, bodies) is written by strangers, so it
reaches the model as untrusted content. Sending asks the user by default (``MAIL_RULES`` in
skills/default_rules.py).
"""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import formatdate, getaddresses, make_msgid
from typing import Annotated

from pydantic import Field

from agent.errors import ToolError, UserError
from agent.provenance import Provenance
from agent.tools import ContentPart, Tool, ToolResult, function_tool
from sandbox.rules import ValueSubject
from skills.context import SkillContext
from skills.guard import with_rule
from skills.mail import imap, message, smtp
from skills.mail.config import MailAccount, MailSettings
from skills.mail.query import HELP, criteria

MAX_RESULTS = 50

Addresses = Annotated[
    list[str] | str, Field(description="one address or a list, e.g. 'bob@example.com'")
]


def make_mail_tools(context: SkillContext) -> list[Tool]:
    """The four mail tools, or none when no account is configured."""
    settings = context.options.get("mail")
    if not isinstance(settings, MailSettings) or not settings.accounts:
        return []
    environ = context.environ

    def account() -> MailAccount:
        try:
            return settings.account()
        except UserError as exc:
            raise ToolError(f"mail is not set up: {exc.message}. Tell the user.") from None

    def mail_send(
        to: Addresses,
        subject: Annotated[str, Field(description="the subject line")],
        body: Annotated[str, Field(description="the plain-text body")],
        cc: Annotated[list[str] | str | None, Field(description="copy to these")] = None,
        reply_to_id: Annotated[
            str | None, Field(description="id of the message this answers (from mail_search)")
        ] = None,
    ) -> str:
        """Send a plain-text e-mail from the user's account."""
        acct = account()
        msg = EmailMessage()
        msg["From"] = acct.address
        msg["To"] = ", ".join(_addresses(to, "to"))
        if cc:
            msg["Cc"] = ", ".join(_addresses(cc, "cc"))
        msg["Subject"] = subject
        msg["Date"] = formatdate(localtime=True)
        msg["Message-ID"] = make_msgid(domain=acct.address.rpartition("@")[2] or None)
        if reply_to_id:
            original = _original_headers(acct, reply_to_id)
            msg.replace_header("Subject", _reply_subject(subject, original["Subject"]))
            if original["Message-ID"]:
                refs = f"{original['References']} {original['Message-ID']}".strip()
                msg["In-Reply-To"] = original["Message-ID"]
                msg["References"] = refs
        msg.set_content(body)
        accepted = smtp.send(acct, msg, environ)
        return f"sent {msg['Message-ID']} to {', '.join(accepted)}"

    def _original_headers(acct: MailAccount, id: str) -> dict[str, str]:
        where = imap.MessageId.parse(id)
        with imap.connect(acct, environ) as client:
            imap.select(client, where.folder)
            items = imap.fetch(
                client,
                where.uid,
                "(BODY.PEEK[HEADER.FIELDS (MESSAGE-ID REFERENCES SUBJECT)])",
            )
        if not items:
            raise ToolError(f"reply_to_id: there is no message {id}; search again for its id")
        head = message.parse(items[0][1])
        return {k: message.header(head, k) for k in ("Message-ID", "References", "Subject")}

    def mail_search(
        query: Annotated[str, Field(description=HELP)] = "",
        folder: Annotated[str, Field(description="the folder to search")] = "INBOX",
        unread_only: Annotated[bool, Field(description="only unread messages")] = False,
        limit: Annotated[int, Field(ge=1, le=MAX_RESULTS, description="newest first")] = 20,
    ) -> ToolResult:
        """Search a mail folder; returns ids, dates, senders and subjects, newest first."""
        keys = criteria(query, unread_only)
        with imap.connect(account(), environ) as client:
            imap.select(client, folder)
            uids = imap.search(client, keys)
            chosen = list(reversed(uids))[:limit]
            lines, senders = [], []
            for uid in chosen:
                items = imap.fetch(
                    client, uid, "(FLAGS BODY.PEEK[HEADER.FIELDS (FROM DATE SUBJECT)])"
                )
                head = message.parse(items[0][1]) if items else message.parse(b"")
                flags = items[0][0].decode("ascii", "replace") if items else ""
                unread = "" if "\\Seen" in flags else " [unread]"
                senders.append(message.header(head, "From"))
                lines.append(
                    f"{imap.MessageId(folder, uid)} | {message.header(head, 'Date')} | "
                    f"{message.header(head, 'From')} | {message.header(head, 'Subject')}{unread}"
                )
        if not lines:
            return ToolResult.text(f"no messages in {folder} match")
        more = f" (showing the newest {limit})" if len(uids) > limit else ""
        listing = "\n".join(lines)
        return ToolResult(
            (
                ContentPart(f"{len(uids)} messages match{more} (id | date | from | subject):"),
                ContentPart(listing, untrusted=True),
            ),
            provenance=Provenance.mail(", ".join(dict.fromkeys(senders))),
        )

    def mail_read(
        id: Annotated[str, Field(description="a message id from mail_search, e.g. 'INBOX:12'")],
    ) -> ToolResult:
        """Read one message: its headers, its text body and the names of its attachments."""
        where = imap.MessageId.parse(id)
        with imap.connect(account(), environ) as client:
            imap.select(client, where.folder)
            items = imap.fetch(client, where.uid, "(BODY[])")
        if not items:
            raise ToolError(f"there is no message {id}; search again for its id")
        return render(message.parse(items[0][1]), str(where))

    def mail_list_folders() -> str:
        """List the mail folders of the account."""
        with imap.connect(account(), environ) as client:
            return "\n".join(imap.list_folders(client)) or "(no folders)"

    send = function_tool(mail_send)
    # A mailbox is written by strangers: even an error may quote a sender's words.
    read = Provenance(kind="mail", trusted=False)
    return [
        with_rule(send, "mail.send", "other", ValueSubject("to")),
        with_rule(function_tool(mail_search), "mail.search", "read", provenance=read),
        with_rule(function_tool(mail_read), "mail.read", "read", provenance=read),
        with_rule(function_tool(mail_list_folders), "mail.folders", "read", provenance=read),
    ]


def render(msg: EmailMessage, id: str) -> ToolResult:
    """A message as the model reads it: our framing trusted, the sender's words untrusted."""
    head = "\n".join(f"{name}: {message.header(msg, name)}" for name in message.HEADERS)
    files = message.attachments(msg)
    listed = "\n".join(f"- {name} ({size} bytes)" for name, size in files) or "(none)"
    tail = f"attachments:\n{listed}"
    problems = message.problems(msg)
    if problems:
        tail += f"\n[this message is malformed ({', '.join(problems)}); parts may be missing]"
    return ToolResult(
        (
            ContentPart(f"message {id}"),
            ContentPart(head, untrusted=True),
            ContentPart(message.text_body(msg), untrusted=True),
            ContentPart(tail),
        ),
        provenance=Provenance.mail(message.header(msg, "From")),
    )


def _reply_subject(subject: str, original: str) -> str:
    if subject.strip():
        return subject
    return original if original.lower().startswith("re:") else f"Re: {original}"


def _addresses(value: list[str] | str, field: str) -> list[str]:
    items = [value] if isinstance(value, str) else value
    parsed = [addr for _name, addr in getaddresses(items)]
    bad = [a for a in parsed if "@" not in a] or ([] if parsed else ["(empty)"])
    if bad:
        raise ToolError(f"{field}: {', '.join(bad)} is not an e-mail address")
    return [str(i) for i in items]
