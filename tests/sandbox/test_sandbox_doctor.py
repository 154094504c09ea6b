"""``agent doctor`` reports, for this machine, the guarantees docs/sandbox.md lists."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from cli.main import app
from sandbox.cgroup import find_place
from sandbox.doctor import checks
from sandbox.settings import SandboxSettings

DOCS = Path(__file__).resolve().parent.parent.parent / "docs" / "sandbox.md"


def test_every_check_is_a_guarantee_the_docs_state() -> None:
    documented = {m.lower() for m in re.findall(r"^- \*\*([^*]+?)\.\*\*", DOCS.read_text(), re.M)}
    names = [c.name for c in checks()]
    missing = [n for n in names if n.lower() not in documented]
    assert not missing, f"doctor checks that docs/sandbox.md does not state: {missing}"


def test_doctor_prints_what_holds_here() -> None:
    result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.startswith("ok  bubblewrap:") for line in lines), result.output
    memory = next(line for line in lines if "memory for the whole tree" in line)
    assert memory.startswith("ok  " if find_place().usable else "NO  "), memory


def test_doctor_says_when_the_sandbox_is_off() -> None:
    report = checks(SandboxSettings(backend="off"))
    assert [c.holds for c in report] == [False]
