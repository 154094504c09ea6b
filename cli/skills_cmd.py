"""``agent skills``: list, inspect, install, approve, remove and check skills.

Installing shows the skill's permission manifest and asks for consent; the skill is then
pinned in the lock file by a sha256 of its content. A skill whose content changed is disabled
until ``agent skills approve NAME``, which shows how its manifest changed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agent.errors import UserError
from cli.console import SafeConsole
from skills.context import SkillContext
from skills.instructions import is_instruction_skill, load_instruction_skill
from skills.lock import LockFile, manifest_diff
from skills.registry import Discovery, discover
from skills.skill import Permissions, Skill
from skills.toolbox import lock_file, skills_dir, status_of

skills_app = typer.Typer(
    help="Installed skills: list, info, install, approve, remove, check.", no_args_is_help=True
)

Confirm = Callable[[str], bool]


class Skills:
    """The skills of one configuration, and the folder and lock file they live in."""

    def __init__(self, settings: Any) -> None:
        self.context = SkillContext.from_settings(settings)
        folder = skills_dir(self.context)
        lock = lock_file(self.context)
        if folder is None or lock is None:
            raise UserError("skills need a data folder: set data_dir or CLAWLOOP_DATA_DIR")
        self.folder: Path = folder
        self.lock: LockFile = lock

    def discover(self) -> Discovery:
        return discover(self.folder, self.context.options.get("mcp"))

    def get(self, name: str) -> Skill:
        found = self.discover().skills
        if name not in found:
            raise UserError(f"there is no skill {name!r}; see `agent skills list`")
        return found[name]

    def status(self, skill: Skill) -> str:
        return status_of(skill, self.lock)


@dataclass(slots=True)
class SkillRow:
    """One skill as `agent skills list` shows it, with its manifest's lines."""

    skill: Skill
    status: str  # "new: disabled" and "changed: disabled" say the skill does not load
    permissions: list[str]


def skill_rows(skills: Skills) -> tuple[list[SkillRow], list[str]]:
    """Every skill with its status, and the problems of those that did not load."""
    found = skills.discover()
    rows = []
    for skill in found.skills.values():
        status = skills.status(skill)
        shown = status if status not in ("new", "changed") else f"{status}: disabled"
        lines = skill.permissions.lines() if skill.permissions is not None else []
        rows.append(SkillRow(skill, shown, lines))
    return rows, list(found.problems)


def list_skills(skills: Skills, console: Console) -> int:
    """A table of every skill: name, status, source, description."""
    rows, problems = skill_rows(skills)
    table = Table(title=f"skills (folder {skills.folder})")
    for column in ("skill", "status", "from", "description"):
        table.add_column(column, overflow="fold")
    for row in rows:
        skill = row.skill
        table.add_row(skill.name, row.status, escape(skill.source), escape(skill.description))
    console.print(table)
    for problem in problems:
        console.print(f"[yellow]not loaded:[/yellow] {escape(problem)}")
    return 0


def show_info(skills: Skills, name: str, console: Console) -> int:
    """Everything about one skill: source, status, manifest, requirements, instructions."""
    skill = skills.get(name)
    status = skills.status(skill)
    console.print(f"[bold]{skill.name}[/bold]: {escape(skill.description)}")
    console.print(f"from: {escape(skill.source)}\nstatus: {status}")
    if skill.permissions is not None:
        console.print("permissions:")
        for line in skill.permissions.lines():
            console.print(f"  {escape(line)}")
    if status == "changed":
        _print_diff(skills.lock.approved_permissions(name), skill, console)
    rules = [f"{k} {t}" for k in ("deny", "ask", "allow") for t in getattr(skill.rules, k)]
    if rules:
        console.print("default rules: " + escape(", ".join(rules)))
    if skill.requires.get("bins") or skill.requires.get("env"):
        needs = skill.requires.get("bins", []) + skill.requires.get("env", [])
        console.print("requires: " + ", ".join(needs))
    if skill.instructions:
        console.print("instructions:\n" + escape(skill.instructions))
    return 0


def install(skills: Skills, spec: str, console: Console, confirm: Confirm) -> int:
    """Install from a folder, a .py file, a git URL or a Python package, with consent."""
    if _is_git_url(spec):
        with tempfile.TemporaryDirectory(prefix="clawloop-skill-") as tmp:
            clone = Path(tmp) / "repo"
            _run(["git", "clone", "--depth", "1", "--quiet", spec, str(clone)], f"git clone {spec}")
            shutil.rmtree(clone / ".git", ignore_errors=True)
            return _install_path(skills, clone, console, confirm, spec)
    path = Path(spec).expanduser()
    if path.exists():
        return _install_path(skills, path.resolve(), console, confirm, spec)
    return _install_package(skills, spec, console, confirm)


def _install_path(skills: Skills, path: Path, console: Console, confirm: Confirm, spec: str) -> int:
    if is_instruction_skill(path):
        name = load_instruction_skill(path).name
        target = skills.folder / name
        _place(target, lambda: shutil.copytree(path, target))
    elif path.is_file() and path.suffix == ".py":
        target = skills.folder / path.name
        _place(target, lambda: shutil.copy2(path, target))
    elif (path / "pyproject.toml").exists() or (path / "setup.py").exists():
        return _install_package(skills, str(path), console, confirm)
    else:
        raise UserError(
            f"{spec} is not a skill: give a folder with SKILL.md, a .py file, a Python "
            "package (folder with pyproject.toml, or a name on PyPI) or a git URL"
        )
    new = [s for s in skills.discover().skills.values() if _lives_in(s, target)]
    if not new:
        _remove_path(target)
        raise UserError(f"{spec} registers no skill; see docs/skills.md for how to write one")
    if not _consent(skills, new, console, confirm):
        _remove_path(target)
        console.print("not installed")
        return 1
    return 0


def _install_package(skills: Skills, spec: str, console: Console, confirm: Confirm) -> int:
    before = {s.name for s in skills.discover().skills.values()}
    _run([sys.executable, "-m", "pip", "install", "--quiet", spec], f"pip install {spec}")
    new = [s for s in skills.discover().skills.values() if s.name not in before]
    if not new:
        console.print(f"{escape(spec)} is installed but registers no new skill")
        return 1
    if not _consent(skills, new, console, confirm):
        dists = sorted({s.source.removeprefix("plugin ") for s in new})
        _run([sys.executable, "-m", "pip", "uninstall", "--quiet", "-y", *dists], "pip uninstall")
        console.print("not installed")
        return 1
    return 0


def _consent(skills: Skills, new: list[Skill], console: Console, confirm: Confirm) -> bool:
    for skill in new:
        console.print(f"[bold]{skill.name}[/bold] ({escape(skill.source)}) asks for:")
        for line in (skill.permissions or Permissions()).lines():
            console.print(f"  {escape(line)}")
    names = ", ".join(s.name for s in new)
    if not confirm(f"Install and allow {names} with these permissions?"):
        return False
    for skill in new:
        skills.lock.approve(skill)
        console.print(f"installed {skill.name}")
    return True


def approve(skills: Skills, name: str, console: Console, confirm: Confirm) -> int:
    """Approve a new or changed skill as it is now, after showing its manifest (diff)."""
    skill = skills.get(name)
    status = skills.status(skill)
    if status in ("builtin", "configured"):
        console.print(f"{name} is {status}; it needs no approval")
        return 0
    if status == "approved":
        console.print(f"{name} is already approved as it is")
        return 0
    if status == "changed":
        console.print(f"{name} changed since it was approved.")
        _print_diff(skills.lock.approved_permissions(name), skill, console)
    for line in (skill.permissions or Permissions()).lines():
        console.print(f"  {escape(line)}")
    if not confirm(f"Allow {name} with these permissions?"):
        console.print(f"{name} stays disabled")
        return 1
    skills.lock.approve(skill)
    console.print(f"approved {name}")
    return 0


def remove(skills: Skills, name: str, console: Console) -> int:
    """Remove an installed skill and its lock entry."""
    skill = skills.get(name)
    if skill.trusted or skill.metadata.get("configured"):
        raise UserError(f"{name} is {skills.status(skill)}; it cannot be removed this way")
    if skill.source.startswith("plugin "):
        dist = skill.source.removeprefix("plugin ")
        _run([sys.executable, "-m", "pip", "uninstall", "--quiet", "-y", dist], "pip uninstall")
    elif skill.path is not None:
        _remove_path(skill.path)
    skills.lock.forget(name)
    console.print(f"removed {name}")
    return 0


def check(skills: Skills, console: Console, environ: dict[str, str] | None = None) -> int:
    """Verify every skill: its requirements (programs, variables), hashes and approvals."""
    environ = dict(os.environ if environ is None else environ)
    found = skills.discover()
    problems = [f"not loaded: {p}" for p in found.problems]
    for skill in found.skills.values():
        status = skills.status(skill)
        if status in ("new", "changed"):
            problems.append(f"{skill.name}: {status}, disabled until `agent skills approve`")
        commands = (skill.permissions or Permissions()).commands
        bins = skill.requires.get("bins", []) + [c for c in commands if " " not in c]
        missing = [b for b in dict.fromkeys(bins) if "*" not in b and shutil.which(b) is None]
        if missing:
            problems.append(f"{skill.name}: programs not found: {', '.join(missing)}")
        unset = [v for v in skill.requires.get("env", []) if not environ.get(v)]
        if unset:
            problems.append(f"{skill.name}: variables not set: {', '.join(unset)}")
    for problem in problems:
        console.print(f"[red]✗[/red] {escape(problem)}")
    if not problems:
        console.print(f"all {len(found.skills)} skills are ready")
    return 1 if problems else 0


def _print_diff(old: Permissions | None, skill: Skill, console: Console) -> None:
    lines = manifest_diff(old, skill.permissions or Permissions())
    console.print("manifest changes:" if lines else "the manifest is unchanged (the code changed)")
    for line in lines:
        style = "green" if line.startswith("+") else "red"
        console.print(f"  [{style}]{escape(line)}[/{style}]")


def _is_git_url(spec: str) -> bool:
    return spec.startswith(("git+", "git@", "ssh://")) or (
        spec.startswith(("https://", "http://", "file://")) and spec.rstrip("/").endswith(".git")
    )


def _lives_in(skill: Skill, target: Path) -> bool:
    return skill.path is not None and skill.path.resolve() == target.resolve()


def _place(target: Path, copy: Callable[[], object]) -> None:
    if target.exists():
        raise UserError(f"{target} already exists: remove the installed skill first")
    target.parent.mkdir(parents=True, exist_ok=True)
    copy()


def _remove_path(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def _run(argv: list[str], what: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no error message"])[-1]
        raise UserError(f"{what} failed: {last}")


def _skills() -> Skills:
    from cli.config import load_settings

    return Skills(load_settings())


def _confirm(yes: bool) -> Confirm:
    if yes:
        return lambda _question: True
    if not sys.stdin.isatty():
        return lambda _question: False
    return lambda question: typer.confirm(question, default=False)


@skills_app.command("list")
def list_command() -> None:
    """Show every skill, whether it is enabled, and where it comes from."""
    raise typer.Exit(list_skills(_skills(), SafeConsole()))


@skills_app.command("info")
def info_command(name: str = typer.Argument(..., help="the skill's name")) -> None:
    """Show a skill's source, status, permission manifest and instructions."""
    raise typer.Exit(show_info(_skills(), name, SafeConsole()))


@skills_app.command("install")
def install_command(
    spec: str = typer.Argument(..., help="a folder, a .py file, a git URL or a package"),
    yes: bool = typer.Option(False, "--yes", "-y", help="accept the permissions shown"),
) -> None:
    """Install a skill after showing its permission manifest and asking for consent."""
    raise typer.Exit(install(_skills(), spec, SafeConsole(), _confirm(yes)))


@skills_app.command("approve")
def approve_command(
    name: str = typer.Argument(..., help="the skill's name"),
    yes: bool = typer.Option(False, "--yes", "-y", help="accept the permissions shown"),
) -> None:
    """Approve a new or changed skill as it is now (shows how its manifest changed)."""
    raise typer.Exit(approve(_skills(), name, SafeConsole(), _confirm(yes)))


@skills_app.command("remove")
def remove_command(name: str = typer.Argument(..., help="the skill's name")) -> None:
    """Remove an installed skill (its folder, file or package) and its lock entry."""
    raise typer.Exit(remove(_skills(), name, SafeConsole()))


@skills_app.command("check")
def check_command() -> None:
    """Check every skill's required programs and variables, hashes and approvals."""
    raise typer.Exit(check(_skills(), SafeConsole()))
