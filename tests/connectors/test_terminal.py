"""`agent run` answers asks through the same ``ApprovalRequested`` event a chat answers.

Run as its users run it: a child process, the real sandbox, the terminal a real pseudo-terminal.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOUCH = [
    {"tool_calls": [{"name": "shell", "arguments": {"command": "touch made.txt"}}]},
    "done",
]


def args(tmp_path: Path, ws: Path) -> list[str]:
    script = tmp_path / "turns.json"
    script.write_text(json.dumps(TOUCH))
    return [sys.executable, "-m", "cli.main", "run", "make it", "--script", str(script),
            "-w", str(ws)]  # fmt: skip


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}


def test_json_output_shows_the_ask_and_who_answered(tmp_path: Path, ws: Path) -> None:
    yes = subprocess.run(
        [*args(tmp_path, ws), "--json", "--yes"], env=env(), capture_output=True, text=True,
        timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    events = [json.loads(line) for line in yes.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert "approval_requested" in kinds, (yes.stdout, yes.stderr)
    assert (
        kinds.index("approval_requested")
        < kinds.index("approval_resolved")
        < kinds.index("tool_result")
    )
    [ask] = [e for e in events if e["type"] == "approval_requested"]
    [resolved] = [e for e in events if e["type"] == "approval_resolved"]
    assert ask["call"]["function"]["name"] == "shell" and ask["summary"].startswith("shell(")
    assert resolved["id"] == ask["id"] and resolved["outcome"] == "once"
    assert resolved["by"] == "--yes" and (ws / "made.txt").exists()
    (ws / "made.txt").unlink()
    no = subprocess.run(
        [*args(tmp_path, ws), "--json"], env=env(), capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    [resolved] = [json.loads(x) for x in no.stdout.splitlines() if "approval_resolved" in x]
    assert resolved["outcome"] == "deny" and not (ws / "made.txt").exists()


def test_the_terminal_prompt_answers_the_event(tmp_path: Path, ws: Path) -> None:
    main, child = pty.openpty()
    proc = subprocess.Popen(
        args(tmp_path, ws), env=env(), stdin=child, stdout=child, stderr=child, close_fds=True
    )
    os.close(child)
    seen = b""
    answered = False
    deadline = time.monotonic() + 60
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(main, 4096)
                except OSError:
                    break
            if not answered and b"approve this tool call?" in seen and b"[o/a/d]" in seen:
                os.write(main, b"o\n")
                answered = True
        proc.wait(30)
    finally:
        proc.kill()
        os.close(main)
    text = seen.decode(errors="replace")
    assert answered and "approve this tool call?" in text and "touch made.txt" in text
    assert proc.returncode == 0 and (ws / "made.txt").exists()
