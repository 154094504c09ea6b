"""``list_files``, the small profile's listing: real files in a real workspace, counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tools import Toolbox
from cli.approvals import AutoApprover
from sandbox.settings import SandboxSettings
from skills.context import Places, SkillContext
from skills.toolbox import build_toolbox


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "costs.txt").write_text("12\n7\n30\n5\n")
    (ws / "people.csv").write_text("name,age\nada,36\nbob,41\n")
    return ws


def toolbox(ws: Path) -> Toolbox:
    context = SkillContext.create(
        ws, SandboxSettings(), places=Places(audit_path=ws.parent / "audit.jsonl")
    )
    return build_toolbox(context, AutoApprover(), ["simple"])


def test_a_listing_says_how_many_files_and_folders_it_holds(ws: Path) -> None:
    tb = toolbox(ws)
    tool = tb.get("list_files")
    assert tool is not None
    assert tool.call({"folder": "."}).render() == (
        "The workspace holds 2 files: costs.txt, people.csv."
    )
    (ws / "docs").mkdir()
    (ws / "docs" / "a.md").write_text("a\n")
    assert tool.call({"folder": "."}).render() == (
        "The workspace holds 2 files and 1 folder: costs.txt, docs/, people.csv."
    )
    assert tool.call({"folder": "docs"}).render() == "docs holds 1 file: a.md."
