"""Permission rules: ``tool`` or ``tool(pattern)``, and how a pattern meets a tool's arguments.

Each tool declares a :class:`RuleTarget`: the name rules use for it (``shell``, ``files.write``,
``mail.send``), what kind of effect it has, and a :class:`Subject` saying which argument a pattern
is matched against and how. A skill added later (mail, web) declares its own subject, so the rule
language grows without this file knowing about it.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Literal, Protocol

from agent.errors import ConfigError
from sandbox.command import ParsedCommand, Token, parse_command

Kind = Literal["allow", "ask", "deny"]
Effect = Literal["read", "write", "exec", "other"]

_RULE = re.compile(r"^\s*([A-Za-z0-9_.*-]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)


@dataclass(slots=True, frozen=True)
class Rule:
    """One allow / ask / deny entry."""

    kind: Kind
    tool: str  # a rule name such as ``shell`` or ``files.*``
    pattern: str | None  # None: every call of the tool
    text: str
    source: str = "config"  # "config", "default", "session" (said "always" during this run)


def parse_rule(text: str, kind: Kind, source: str = "config") -> Rule:
    """Parse ``tool`` or ``tool(pattern)``; a malformed rule is a :class:`ConfigError`."""
    m = _RULE.match(text)
    if not m:
        raise ConfigError(
            f"sandbox.{kind}: {text!r} is not a rule; write TOOL or TOOL(PATTERN), "
            "e.g. 'shell(git status*)' or 'files.write(src/**)'"
        )
    pattern = m.group(2)
    pattern = None if pattern is None or pattern.strip() in ("", "*", "**") else pattern.strip()
    return Rule(kind, m.group(1), pattern, text.strip(), source)


class Subject(Protocol):
    """How a rule's pattern is matched against one tool's arguments."""

    def matches(self, pattern: str, arguments: dict[str, Any], kind: Kind, workspace: Path) -> bool:
        """Whether ``pattern`` covers this call (deny and ask may match more loosely than allow)."""
        ...

    def exact(self, arguments: dict[str, Any], workspace: Path) -> str:
        """A pattern that matches exactly this call (what "always" saves)."""
        ...


@dataclass(slots=True, frozen=True)
class RuleTarget:
    """What a tool is called in rules, what it does, and how patterns meet its arguments."""

    name: str
    effect: Effect = "other"
    subject: Subject | None = None

    def rule_for(self, arguments: dict[str, Any], workspace: Path) -> str:
        """The rule text that would allow exactly this call."""
        if self.subject is None:
            return self.name
        return f"{self.name}({self.subject.exact(arguments, workspace)})"


def tool_matches(rule_tool: str, target: RuleTarget, tool_name: str) -> bool:
    """A rule names a tool by its rule name (globs allowed) or by its tool name."""
    return fnmatchcase(target.name, rule_tool) or rule_tool == tool_name


# --- command patterns -------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class CommandSubject:
    """Patterns are command lines, matched word by word against the parsed command.

    A word is a glob over one argument; a word that is just ``*`` stands for any number of
    arguments; a last word ending in ``*`` also accepts whatever follows (``git status*``).
    Operators in a pattern must appear in the command. ``*`` never crosses an operator.
    """

    arg: str = "command"

    def matches(self, pattern: str, arguments: dict[str, Any], kind: Kind, workspace: Path) -> bool:
        command = arguments.get(self.arg)
        if not isinstance(command, str):
            return False
        parsed = parse_command(command)
        words = _pattern_tokens(pattern)
        if kind == "allow":
            # Chains, substitutions and here-documents are only allowed by a rule written for them.
            if parsed.complex is not None:
                return " ".join(pattern.split()) == " ".join(command.split())
            return _match(words, tuple(parsed.tokens))
        return _loose_match(words, parsed)

    def exact(self, arguments: dict[str, Any], workspace: Path) -> str:
        command = str(arguments.get(self.arg, ""))
        parsed = parse_command(command)
        if parsed.complex is not None:
            return " ".join(command.split())
        return " ".join(t.text if t.op else _literal_word(t.text) for t in parsed.tokens)


def _literal_word(word: str) -> str:
    return shlex.quote(word)  # quoted words in a pattern are literal, globs included


@dataclass(slots=True, frozen=True)
class _PWord:
    glob: str
    op: bool = False
    star: bool = False  # the bare ``*`` word
    prefix: bool = False  # the last word ends in ``*``


@lru_cache(maxsize=512)
def _pattern_tokens(pattern: str) -> tuple[_PWord, ...]:
    tokens = parse_command(pattern).tokens
    out: list[_PWord] = []
    for i, tok in enumerate(tokens):
        if tok.op:
            out.append(_PWord(tok.text, op=True))
        elif tok.quoted:
            out.append(_PWord(_escape_glob(tok.text)))
        elif tok.text == "*":
            out.append(_PWord("*", star=True))
        else:
            last = i == len(tokens) - 1
            out.append(_PWord(tok.text, prefix=last and tok.text.endswith("*")))
    return tuple(out)


def _escape_glob(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def _match(words: tuple[_PWord, ...], tokens: tuple[Token, ...]) -> bool:
    @cache
    def m(i: int, j: int) -> bool:
        if i == len(words):
            return j == len(tokens)
        w = words[i]
        if w.star:
            return m(i + 1, j) or (j < len(tokens) and not tokens[j].op and m(i, j + 1))
        if j == len(tokens):
            return False
        tok = tokens[j]
        if w.op or tok.op:
            return w.op and tok.op and w.glob == tok.text and m(i + 1, j + 1)
        if not fnmatchcase(tok.text, w.glob):
            return False
        if w.prefix:
            return not any(t.op for t in tokens[j + 1 :])
        return m(i + 1, j + 1)

    return m(0, 0)


_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = frozenset({"command", "env", "exec", "nice", "nohup", "time", "builtin"})


def _bare(segment: list[Token]) -> list[Token]:
    """``FOO=1 env /bin/rm -rf ~`` as ``rm -rf ~``, so a deny rule for ``rm`` still sees it."""
    words = list(segment)
    while words and (
        (_ASSIGNMENT.match(words[0].text) and not words[0].quoted)
        or words[0].text in _WRAPPERS
        or (len(words) < len(segment) and words[0].text.startswith("-"))
    ):
        words.pop(0)
    if words and "/" in words[0].text:
        words[0] = Token(words[0].text.rsplit("/", 1)[1], quoted=words[0].quoted)
    return words


def _loose_match(words: tuple[_PWord, ...], parsed: ParsedCommand, depth: int = 0) -> bool:
    """For deny and ask: any run of the simple commands inside, including hidden ones."""
    segs = [_bare(seg) for seg in parsed.segments]
    for i in range(len(segs)):
        run: list[Token] = []
        for j in range(i, len(segs)):
            if j > i:
                run.append(
                    Token(parsed.controls[j - 1] if j - 1 < len(parsed.controls) else ";", op=True)
                )
            run.extend(segs[j])
            if _match(words, tuple(run)):
                return True
    if _match(words, tuple(parsed.tokens)):
        return True
    return depth < 4 and any(
        _loose_match(words, parse_command(body), depth + 1) for body in parsed.hidden
    )


# --- path patterns ----------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class PathSubject:
    """Patterns are globs over a path relative to the workspace (``src/**``, ``.env``).

    ``*`` stays within one folder, ``**`` crosses folders; a pattern starting with ``/`` is an
    absolute path. Symbolic links inside the workspace are followed first, so a link named
    ``notes`` that points at ``.env`` is still ``.env`` to a rule.
    """

    arg: str = "path"

    def matches(self, pattern: str, arguments: dict[str, Any], kind: Kind, workspace: Path) -> bool:
        value = arguments.get(self.arg)
        if not isinstance(value, str):
            return False
        rel = normalize_path(value, workspace)
        pat = pattern[2:] if pattern.startswith("./") else pattern
        return _glob_regex(pat).fullmatch(rel) is not None

    def exact(self, arguments: dict[str, Any], workspace: Path) -> str:
        return _escape_glob(normalize_path(str(arguments.get(self.arg, "")), workspace))


def normalize_path(value: str, workspace: Path) -> str:
    """The workspace-relative form of a path (absolute if it lies outside)."""
    ws = workspace.resolve()
    path = Path(os.path.expanduser(value))
    path = path if path.is_absolute() else ws / path
    resolved = Path(os.path.realpath(path))  # never raises, not even on a link loop
    try:
        rel = resolved.relative_to(ws).as_posix()
    except ValueError:
        return resolved.as_posix()
    return "." if rel in ("", ".") else rel


@lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape("["))
                i += 1
            else:
                out.append("[" + pattern[i + 1 : end].replace("\\", "\\\\") + "]")
                i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


# --- plain values -----------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class ValueSubject:
    """Patterns are globs over one argument's value (``*@example.com`` for a recipient).

    A list argument is covered by an allow rule only if every item matches; deny and ask
    match if any item does.
    """

    arg: str

    def matches(self, pattern: str, arguments: dict[str, Any], kind: Kind, workspace: Path) -> bool:
        value = arguments.get(self.arg)
        items = value if isinstance(value, list) else [value]
        texts = [str(v) for v in items if v is not None]
        if not texts:
            return False
        hits = [fnmatchcase(t, pattern) for t in texts]
        return all(hits) if kind == "allow" else any(hits)

    def exact(self, arguments: dict[str, Any], workspace: Path) -> str:
        value = arguments.get(self.arg)
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        return _escape_glob(str(value))
