"""Shared fixtures: every test gets its own config, data and cache folders, never the user's."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Point clawloop's config, data and cache folders at a fresh temporary folder."""
    home = tmp_path_factory.mktemp("clawloop-home")
    monkeypatch.setenv("CLAWLOOP_CONFIG", str(home / "config.toml"))
    monkeypatch.setenv("CLAWLOOP_DATA_DIR", str(home / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    for var in ("CLAWLOOP_BACKEND", "CLAWLOOP_MODEL", "CLAWLOOP_DEBUG", "CLAWLOOP_MAX_STEPS"):
        monkeypatch.delenv(var, raising=False)
    return home
