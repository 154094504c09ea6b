"""Shared fixtures: every test gets its own config and data folders, never the user's."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache folder for the whole run: later loads of the model reuse the first one's."""
    return tmp_path_factory.mktemp("clawloop-cache")


@pytest.fixture(autouse=True)
def isolated_home(
    shared_cache: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Fresh config and data folders for each test; the run's one cache folder."""
    home = tmp_path_factory.mktemp("clawloop-home")
    monkeypatch.setenv("CLAWLOOP_CONFIG", str(home / "config.toml"))
    monkeypatch.setenv("CLAWLOOP_DATA_DIR", str(home / "data"))
    monkeypatch.setenv("CLAWLOOP_CACHE_DIR", str(shared_cache))
    for var in ("CLAWLOOP_BACKEND", "CLAWLOOP_MODEL", "CLAWLOOP_DEBUG", "CLAWLOOP_MAX_STEPS"):
        monkeypatch.delenv(var, raising=False)
    return home
