"""The ``[mail]`` config table: accounts, their servers, and where each password comes from.

A password is never written in the config: it is read from an environment variable
(``password_env``) or from a file only the user can read (``password_file``), at the moment a
connection is made, and it is added to the redactor so no output can carry it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.errors import UserError

if TYPE_CHECKING:
    import ssl

Security = Literal["starttls", "tls", "none"]


class MailAccount(BaseModel):
    """One mailbox: its address, SMTP and IMAP servers, login and password source."""

    model_config = ConfigDict(extra="forbid")

    address: str = Field(description="the From address")
    username: str | None = Field(default=None, description="login name (default: address)")
    password_env: str | None = Field(default=None, description="variable holding the password")
    password_file: Path | None = Field(default=None, description="file holding the password")
    smtp_host: str | None = None
    smtp_port: int | None = None
    smtp_security: Security = "starttls"
    imap_host: str | None = None
    imap_port: int | None = None
    imap_security: Security = "tls"
    ca_file: Path | None = Field(default=None, description="extra CA certificate (self-signed)")
    timeout_s: float = Field(default=30.0, gt=0)

    @property
    def login(self) -> str:
        return self.username or self.address

    def smtp_address(self) -> tuple[str, int]:
        if not self.smtp_host:
            raise UserError(f"mail account {self.address}: set smtp_host in [mail.accounts.*]")
        default = {"starttls": 587, "tls": 465, "none": 25}[self.smtp_security]
        return self.smtp_host, self.smtp_port or default

    def imap_address(self) -> tuple[str, int]:
        if not self.imap_host:
            raise UserError(f"mail account {self.address}: set imap_host in [mail.accounts.*]")
        default = {"starttls": 143, "tls": 993, "none": 143}[self.imap_security]
        return self.imap_host, self.imap_port or default

    def password(self, environ: Mapping[str, str]) -> str:
        """The password, from the environment or a private file; UserError says how to set it."""
        if self.password_env:
            value = environ.get(self.password_env)
            if not value:
                raise UserError(
                    f"mail account {self.address}: the variable {self.password_env} is not set; "
                    "export it with the account's password"
                )
            return value
        if self.password_file:
            path = self.password_file.expanduser()
            try:
                mode = path.stat().st_mode
            except OSError:
                raise UserError(
                    f"mail account {self.address}: password_file {path} does not exist"
                ) from None
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise UserError(
                    f"mail account {self.address}: {path} can be read by others; "
                    f"run `chmod 600 {path}`"
                )
            return path.read_text(encoding="utf-8").strip()
        raise UserError(
            f"mail account {self.address}: set password_env or password_file in its config"
        )


class MailSettings(BaseModel):
    """Everything under ``[mail]``."""

    model_config = ConfigDict(extra="forbid")

    default: str | None = Field(default=None, description="the account the tools use")
    accounts: dict[str, MailAccount] = Field(default_factory=dict)

    def account(self) -> MailAccount:
        """The account the tools use: ``default``, or the only one."""
        if not self.accounts:
            raise UserError("no mail account is configured: add one under [mail.accounts.NAME]")
        if self.default is not None:
            if self.default not in self.accounts:
                raise UserError(f"mail.default names {self.default!r}, which is not an account")
            return self.accounts[self.default]
        if len(self.accounts) > 1:
            raise UserError("several mail accounts are configured: set mail.default to one")
        return next(iter(self.accounts.values()))


def account_passwords(settings: MailSettings, environ: Mapping[str, str]) -> list[str]:
    """Every password that can be read now, for the redactor (unreadable ones are skipped)."""
    found = []
    for account in settings.accounts.values():
        try:
            found.append(account.password(environ))
        except (UserError, OSError):
            continue
    return found


def ssl_context(account: MailAccount) -> ssl.SSLContext:
    """A verifying TLS context; ``ca_file`` adds a CA (a self-signed server certificate)."""
    import ssl  # the config is read on every run; TLS is set up only when mail connects

    context = ssl.create_default_context()
    if account.ca_file is not None:
        context.load_verify_locations(cafile=os.fspath(account.ca_file.expanduser()))
    return context
