"""What a skill's ``start`` is given: the workspace, sandbox settings, the runner, the redactor.

``options`` holds each skill's own config table (``[mail]`` for the mail skill) and ``environ``
the environment credentials are read from; neither ever reaches the model.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import UserError
from sandbox.audit import AuditLog
from sandbox.paths import PathResolver
from sandbox.policy import Policy
from sandbox.runner import CommandRunner, SandboxRunner
from sandbox.secrets import Redactor, find_secrets
from sandbox.settings import SandboxSettings


@dataclass(slots=True)
class SkillContext:
    """What a skill needs to build its tools; every program a skill runs goes through ``runner``."""

    workspace: Path
    settings: SandboxSettings
    runner: CommandRunner
    paths: PathResolver
    redactor: Redactor
    audit: AuditLog
    policy: Policy
    data_dir: Path | None = None
    options: dict[str, Any] = field(default_factory=dict)
    environ: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        workspace: Path,
        settings: SandboxSettings | None = None,
        *,
        audit_path: Path | None = None,
        secrets: Iterable[str] = (),
        data_dir: Path | None = None,
        environ: Mapping[str, str] | None = None,
        options: dict[str, Any] | None = None,
    ) -> SkillContext:
        """The usual context: a bubblewrap (or "off") runner and the policy from ``settings``.

        The policy holds the user's rules; each skill's defaults are merged when it is built.
        """
        settings = settings or SandboxSettings()
        environ = os.environ if environ is None else environ
        if not workspace.is_dir():
            raise UserError(f"the workspace {workspace} is not a folder; create it or pick another")
        workspace = workspace.resolve()
        redactor = Redactor(secrets)
        return cls(
            workspace=workspace,
            settings=settings,
            runner=SandboxRunner(settings, workspace, environ),
            paths=PathResolver(workspace),
            redactor=redactor,
            audit=AuditLog(audit_path, redactor),
            policy=Policy.from_settings(settings, workspace),
            data_dir=data_dir,
            options=dict(options or {}),
            environ=environ,
        )

    @classmethod
    def from_settings(cls, settings: Any, environ: Mapping[str, str] | None = None) -> SkillContext:
        """From the CLI's settings object (``.workspace``, ``.sandbox``, ``.audit_path``,
        ``.data_dir``, ``.mail``); every credential in it or in the environment is redacted,
        mail passwords included."""
        from skills.mail.config import MailSettings, account_passwords

        environ = os.environ if environ is None else environ
        dump = settings.model_dump() if hasattr(settings, "model_dump") else {}
        mail = getattr(settings, "mail", None)
        mail = mail if isinstance(mail, MailSettings) else MailSettings()
        return cls.create(
            Path(settings.workspace),
            settings.sandbox,
            audit_path=getattr(settings, "audit_path", None),
            secrets=[*find_secrets(dump, environ), *account_passwords(mail, environ)],
            data_dir=getattr(settings, "data_dir", None),
            environ=environ,
            options={
                "mail": mail,
                "mcp": dict(getattr(settings, "mcp", None) or {}),
                "skills_dir": getattr(settings, "skills_path", None),
            },
        )
