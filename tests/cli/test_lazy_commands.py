"""`agent`'s commands are imported only when used, and the listing still says what each does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import typer
from typer.testing import CliRunner

from cli.main import COMMANDS, AgentGroup, app

ROOT = Path(__file__).resolve().parents[2]
COMMAND_MODULES = sorted({entry.target.split(":")[0] for entry in COMMANDS})

# Runs `agent ARGS...` in this process, then prints the command modules it imported.
# (Python's import log cannot tell: it leaves out modules loaded by importlib.import_module.)
PROBE = """
import atexit, json, sys
names = json.loads(sys.argv[1])
atexit.register(lambda: print("LOADED", json.dumps([n for n in names if n in sys.modules])))
sys.argv = ["agent", *sys.argv[2:]]
from cli.main import main
main()
"""


def loaded_modules(*args: str, cwd: Path) -> list[str]:
    """The command modules `agent ARGS...` imports."""
    command = [sys.executable, "-c", PROBE, json.dumps(COMMAND_MODULES), *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    line = out.stdout.splitlines()[-1]
    loaded: list[str] = json.loads(line.removeprefix("LOADED "))
    return loaded


def test_each_summary_is_the_first_paragraph_of_its_commands_help() -> None:
    group = typer.main.get_group(app)
    ctx = typer.Context(group)
    for entry in COMMANDS:
        command = group.get_command(ctx, entry.name)
        assert command is not None and command.help is not None
        assert entry.summary == command.help.split("\n\n")[0], entry.name


def test_the_listing_reads_the_same_before_and_after_every_command_is_loaded() -> None:
    lazy = typer.main.get_group(app)
    assert isinstance(lazy, AgentGroup)
    before = lazy.get_help(typer.Context(lazy, info_name="agent"))
    loaded = typer.main.get_group(app)
    for entry in COMMANDS:
        loaded.get_command(typer.Context(loaded), entry.name)
    after = loaded.get_help(typer.Context(loaded, info_name="agent"))
    assert before == after
    assert all(f"\n  {entry.name} " in before for entry in COMMANDS)


def test_help_imports_no_command_module(tmp_path: Path) -> None:
    assert loaded_modules("--help", cwd=tmp_path) == []


def test_run_imports_only_its_own_command_module(tmp_path: Path) -> None:
    turns = tmp_path / "turns.json"
    turns.write_text(json.dumps(["hello"]), encoding="utf-8")
    args = ("run", "say hello", "--script", str(turns), "--workspace", str(tmp_path))
    assert loaded_modules(*args, cwd=tmp_path) == ["cli.run_cmd"]


def test_a_mistyped_command_is_offered_the_closest_names() -> None:
    out = CliRunner().invoke(app, ["sesions"])
    assert out.exit_code == 2
    assert "No such command 'sesions'. Did you mean 'sessions'?" in out.output
