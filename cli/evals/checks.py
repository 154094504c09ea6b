"""Grading one task's run: each part of its check that fails is one line of the verdict."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from cli.evals.suite import Check

COMMAND_TIMEOUT_S = 30.0


def failures(check: Check, workspace: Path, answer: str | None, tool_calls: int) -> list[str]:
    """Why the run did not pass (empty when it did). ``answer`` is None without a final answer."""
    problems: list[str] = []
    if answer is None:
        problems.append("no final answer")
    elif check.answer_regex is not None and not re.search(check.answer_regex, answer):
        problems.append(f"answer does not match {check.answer_regex!r}")
    for rel, pattern in check.files.items():
        problems += _file_problems(workspace / rel, rel, pattern)
    for rel in check.absent:
        if (workspace / rel).exists() or (workspace / rel).is_symlink():
            problems.append(f"{rel} still exists")
    if check.max_calls is not None and tool_calls > check.max_calls:
        problems.append(f"{tool_calls} tool calls (at most {check.max_calls} allowed)")
    if check.command is not None:
        problems += _command_problems(check.command, workspace)
    return problems


def _file_problems(path: Path, rel: str, pattern: str) -> list[str]:
    if not path.is_file():
        return [f"{rel} does not exist"]
    text = path.read_text(encoding="utf-8", errors="replace")
    if re.fullmatch(pattern, text) is None:
        return [f"{rel} holds {text[:80]!r}, which does not match {pattern!r}"]
    return []


def _command_problems(command: str, workspace: Path) -> list[str]:
    """The suite author's check command; it is trusted like the suite file itself."""
    try:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=workspace,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return [f"check command timed out after {COMMAND_TIMEOUT_S:g} s: {command}"]
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        return [f"check command failed ({done.returncode}): {command} {detail[0][:120]}".rstrip()]
    return []
