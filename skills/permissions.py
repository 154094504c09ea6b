"""Holding a skill to its permission manifest, at run time.

A skill that is not built in gets a context whose runner and path resolver hold it to what its
manifest declares, whatever the global rules allow. The OS sandbox is the guarantee: the
programs in ``commands`` are the only executables in its commands' view
(:mod:`sandbox.programs`), the workspace shows only its ``read`` and ``write`` paths and lets
it write only the latter (:mod:`sandbox.writable`), its programs see only the variables in
``env`` and reach only the hosts in ``network`` (none: no network at all; :mod:`sandbox.egress`).

The command-line check here (:func:`check_argv`) only refuses early, with a message the model
can act on, what the view would make fail anyway; a shell can start programs in ways no parser
sees, so nothing relies on it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import Path

from agent.errors import ToolError
from sandbox.command import parse_command
from sandbox.execute import CommandResult
from sandbox.paths import PathResolver
from sandbox.rules import PathSubject, normalize_path
from sandbox.runner import CommandRunner, Grant, SandboxRunner
from skills.context import SkillContext
from skills.skill import Permissions

# Keywords that may stand before a command, and builtins that run no other program.
_KEYWORDS = frozenset(["if", "then", "else", "elif", "while", "until", "do", "!", "{", "time"])
_BUILTINS = frozenset(
    {
        *("fi", "done", "esac", "}", "for", "case", "function", "select", "[", "[[", "test"),
        *("echo", "printf", "read", "set", "unset", "export", "local", "return", "exit"),
        *("shift", "true", "false", ":", "cd", "pwd", "break", "continue", "declare"),
        *("typeset", "trap", "wait", "getopts", "let"),
    }
)
_SHELLS = frozenset({"bash", "sh", "dash"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def programs(command: str) -> list[str]:
    """Every program a shell command line (or script) would start, hidden ones included."""
    parsed = parse_command(command)
    found: list[str] = []
    for segment in parsed.segments:
        words = [t.text for t in segment if not (_ASSIGNMENT.match(t.text) and not t.quoted)]
        while words and words[0] in _KEYWORDS:
            words.pop(0)
        if words and words[0] not in _BUILTINS:
            found.append(words[0].rsplit("/", 1)[-1])
    for body in parsed.hidden:
        found += programs(body)
    return found


def check_argv(skill: str, permissions: Permissions, argv: Sequence[str]) -> None:
    """Refuse ``argv`` unless every program it starts is declared in ``commands``."""
    if not argv:
        raise ToolError("the command is empty")
    program = argv[0].rsplit("/", 1)[-1]
    if program in _SHELLS and len(argv) >= 3 and argv[1] == "-c":
        started = programs(argv[2])
        line = argv[2]
    else:
        started, line = [program], " ".join(argv)
    declared = permissions.commands
    for name in started:
        if name in ("eval", "source", "."):
            raise ToolError(_refusal(skill, f"`{name}` (it hides what runs)", declared))
        if not any(_command_matches(pattern, name, line) for pattern in declared):
            raise ToolError(_refusal(skill, f"the program `{name}`", declared))


def declared_programs(permissions: Permissions) -> list[str]:
    """The programs ``commands`` names (``git log*`` names ``git``): the only ones in view."""
    return list(dict.fromkeys(c.split()[0] for c in permissions.commands if c.strip()))


def _command_matches(pattern: str, program: str, line: str) -> bool:
    if " " in pattern.strip():
        return fnmatchcase(" ".join(line.split()), pattern)
    return fnmatchcase(program, pattern)


def _refusal(skill: str, what: str, declared: list[str]) -> str:
    allowed = ", ".join(declared) or "none"
    return (
        f"refused: the skill {skill!r} did not declare {what} in its permission manifest "
        f"(it declares: {allowed}). Do not retry; tell the user if the skill needs it."
    )


class ScopedRunner:
    """A runner that starts only the programs a skill declared, with only its variables."""

    def __init__(self, skill: str, permissions: Permissions, inner: CommandRunner) -> None:
        self.skill = skill
        self.permissions = permissions
        self.inner = inner

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> CommandResult:
        check_argv(self.skill, self.permissions, argv)
        return self.inner.run(argv, timeout=timeout)

    def check(self) -> None:
        self.inner.check()


@dataclasses.dataclass(slots=True)
class ScopedPaths(PathResolver):
    """A path resolver that lets a skill touch only the paths its manifest declares."""

    skill: str = ""
    permissions: Permissions = dataclasses.field(default_factory=Permissions)

    def resolve(self, path: str, *, for_write: bool = False) -> Path:
        resolved = PathResolver.resolve(self, path, for_write=for_write)
        globs = (
            self.permissions.write
            if for_write
            else [
                *self.permissions.read,
                *self.permissions.write,
            ]
        )
        rel = normalize_path(str(resolved), self.workspace)
        subject = PathSubject("path")
        if not any(subject.matches(g, {"path": rel}, "allow", self.workspace) for g in globs):
            kind = "write" if for_write else "read"
            raise ToolError(
                _refusal(self.skill, f"{kind} access to {rel!r}", globs).replace(
                    "(it declares:", f"({kind} paths:"
                )
            )
        return resolved


def scoped_context(context: SkillContext, skill: str, permissions: Permissions) -> SkillContext:
    """The context a non-built-in skill's ``start`` receives."""
    settings = context.settings
    mode = settings.mode
    if not permissions.write:
        mode = "read-only"
    elif mode == "full-access":
        mode = "workspace-write"  # a skill gets its declared paths and hosts, never the machine
    sandbox = settings.model_copy(update={"env_allowlist": list(permissions.env), "mode": mode})
    runner = SandboxRunner(
        sandbox,
        context.workspace,
        context.environ,
        getattr(context.runner, "hidden", ()),
        grant=Grant(
            network=permissions.network,
            write_paths=permissions.write,
            programs=declared_programs(permissions),
            read_paths=permissions.read,
        ),
    )
    return dataclasses.replace(
        context,
        settings=sandbox,
        runner=ScopedRunner(skill, permissions, runner),
        paths=ScopedPaths(context.workspace, skill=skill, permissions=permissions),
    )
