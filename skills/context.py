"""What a skill's ``start`` is given: the workspace, sandbox settings, the runner, the redactor.

``options`` holds each skill's own config table (``[mail]`` for the mail skill) and ``environ``
the environment credentials are read from; neither ever reaches the model. ``backend`` is the
model the run uses, for a tool that asks it a question of its own (the quarantined reader);
None where no run is wired (``agent tools call``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.backend import Backend
from agent.errors import UserError
from sandbox.audit import AuditLog
from sandbox.paths import PathResolver, clawloop_dirs
from sandbox.policy import Policy
from sandbox.runner import CommandRunner, SandboxRunner, home_folders
from sandbox.secrets import Redactor, credential_file_secrets, find_secrets
from sandbox.settings import SandboxSettings
from sandbox.workspace import OwnPlace, check_workspace, installation, protect_installation

_DATA = "data_dir (or CLAWLOOP_DATA_DIR)"


@dataclass(frozen=True, slots=True)
class Places:
    """clawloop's own files and folders: kept out of the workspace and hidden from its commands.

    ``others`` are further places of clawloop's (sessions, traces, skills folders) that the
    workspace must not hold.
    """

    audit_path: Path | None = None
    data_dir: Path | None = None
    config_path: Path | None = None
    others: tuple[OwnPlace, ...] = ()


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
    backend: Backend | None = None

    @classmethod
    def create(
        cls,
        workspace: Path,
        settings: SandboxSettings | None = None,
        *,
        places: Places = Places(),
        secrets: Iterable[str] = (),
        environ: Mapping[str, str] | None = None,
        options: dict[str, Any] | None = None,
    ) -> SkillContext:
        """The usual context: a bubblewrap (or "off") runner and the policy from ``settings``.

        The policy holds the user's rules; each skill's defaults are merged when it is built.
        The workspace is refused if it is ``/``, the home folder, or holds one of ``places``;
        clawloop's own installation in it is kept read-only. clawloop's config, data and audit
        folders and the user's home are hidden from every sandboxed command and from the
        ``files`` tools alike.
        """
        settings = settings or SandboxSettings()
        environ = os.environ if environ is None else environ
        if not workspace.is_dir():
            raise UserError(f"the workspace {workspace} is not a folder; create it or pick another")
        workspace = workspace.resolve()
        data_dir, audit_path = places.data_dir, places.audit_path
        configs = [places.config_path] if places.config_path is not None else []
        own = [OwnPlace(p, what, _DATA) for p, what in _data_places(data_dir, audit_path)]
        check_workspace(workspace, home_folders(environ), configs, [*own, *places.others])
        sandboxed = settings.backend != "off"
        read_only = protect_installation(workspace, sandboxed, installation())
        hidden = [*clawloop_dirs(), *configs, *(p for p in (data_dir, audit_path) if p)]
        # A folder that holds the workspace cannot be hidden from it (nor write-protected).
        hidden = [p for p in hidden if not _holds(Path(p), workspace)]
        homes = [h for h in home_folders(environ) if not _holds(h, workspace)]
        redactor = Redactor([*secrets, *credential_file_secrets(home_folders(environ))])
        runner = SandboxRunner(settings, workspace, environ, hidden, read_only=read_only)
        return cls(
            workspace=workspace,
            settings=settings,
            runner=runner,
            paths=PathResolver(workspace, [*hidden, *homes], read_only),
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
        ``.data_dir``, ``.mail``, ``.web``); every credential in it or in the environment is
        redacted, mail passwords included."""
        from skills.mail.config import MailSettings, account_passwords

        environ = os.environ if environ is None else environ
        dump = settings.model_dump() if hasattr(settings, "model_dump") else {}
        mail = getattr(settings, "mail", None)
        mail = mail if isinstance(mail, MailSettings) else MailSettings()
        return cls.create(
            Path(settings.workspace),
            settings.sandbox,
            places=Places(
                audit_path=getattr(settings, "audit_path", None),
                data_dir=getattr(settings, "data_dir", None),
                config_path=getattr(settings, "config_path", None),
                others=_settings_places(settings),
            ),
            secrets=[*find_secrets(dump, environ), *account_passwords(mail, environ)],
            environ=environ,
            options={
                "mail": mail,
                "web": getattr(settings, "web", None),
                "mcp": dict(getattr(settings, "mcp", None) or {}),
                "skills_dir": getattr(settings, "skills_path", None),
                "memory": getattr(settings, "memory", None),
                "sessions_dir": getattr(settings, "sessions_dir", None),
                "recipe_file": getattr(getattr(settings, "small", None), "recipe_file", None),
            },
        )


def _data_places(data_dir: Path | None, audit_path: Path | None) -> list[tuple[Path, str]]:
    places = [(data_dir, "data folder"), (audit_path, "audit log")]
    return [(Path(p), what) for p, what in places if p is not None]


def _settings_places(settings: Any) -> tuple[OwnPlace, ...]:
    """The sessions, traces and skills folders and the recipe file named by the CLI's settings,
    where it has them."""
    wanted = [
        ("sessions_dir", "sessions folder", _DATA),
        ("traces_dir", "traces folder", _DATA),
        ("skills_path", "skills folder", "skills_dir"),
    ]
    places = []
    for attribute, what, setting in wanted:
        path = getattr(settings, attribute, None)
        if isinstance(path, (str, Path)):
            places.append(OwnPlace(Path(path), what, setting))
    # A recipe runs without the shell's rules, so a command must not be able to write one.
    recipe_file = getattr(getattr(settings, "small", None), "recipe_file", None)
    if isinstance(recipe_file, str):
        places.append(
            OwnPlace(Path(recipe_file).expanduser(), "recipe file", "[small] recipe_file")
        )
    return tuple(places)


def _holds(folder: Path, workspace: Path) -> bool:
    real = Path(os.path.realpath(folder))
    return real == workspace or real in workspace.parents
