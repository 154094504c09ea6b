"""Shared fixtures: every test gets its own config, data and cache folders, never the user's."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True, scope="session")
def isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One cache folder for the whole run (the engine's KV blocks on disk), never the user's.

    Session-wide, so that module fixtures that load an engine, set up before any function
    fixture, already see it.
    """
    cache = tmp_path_factory.mktemp("clawloop-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache))
        yield cache


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Point clawloop's config and data folders at a fresh temporary folder."""
    home = tmp_path_factory.mktemp("clawloop-home")
    monkeypatch.setenv("CLAWLOOP_CONFIG", str(home / "config.toml"))
    monkeypatch.setenv("CLAWLOOP_DATA_DIR", str(home / "data"))
    for var in (
        "CLAWLOOP_BACKEND",
        "CLAWLOOP_MODEL",
        "CLAWLOOP_DEBUG",
        "CLAWLOOP_MAX_STEPS",
        "CLAWLOOP_CACHE_DIR",
    ):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def ws() -> Iterator[Path]:
    """A workspace straight under the temp folder, reachable by the sandbox's uid.

    pytest's own folders are 0700 and re-chmodded by every pytest run on the machine, which
    resets the ACL that lets the sandbox's unprivileged uid through them.
    """
    folder = Path(tempfile.mkdtemp(prefix="clawloop-ws-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
