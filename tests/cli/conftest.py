"""Fixtures shared by the CLI tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    os.chmod(ws, 0o777)
    return ws
