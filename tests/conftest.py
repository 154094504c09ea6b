"""Shared fixtures: every test gets its own config, data and cache folders, never the user's.

With ``CLAWLOOP_STRICT_SKIPS=1`` (as ``.ci/run`` sets it) a test that would skip for want of
something the ``[test]`` extra or the set-up installs fails instead: a missing module
(``pytest.importorskip``), a model or a package that is not installed, a C helper that did not
build. A run cannot go green with a feature missing. Skips for this machine's hardware (no
GPU, no AVX-512) stay skips, and so does a test marked ``gpu``.
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agent.host import bound_spin_waits

# The tests load torch, the engine's kernels and llama.cpp in this process, as `agent` does;
# as `agent` does, they bound OpenMP's spin before any of them loads (agent/host.py).
bound_spin_waits()

STRICT = os.environ.get("CLAWLOOP_STRICT_SKIPS") == "1"
# Skip reasons that mean something was not installed or not built, not a hardware feature.
MISSING = ("could not import", "not installed", "no c compiler", "not built here", "pip install")
# Modules that exist only with a GPU stack.
GPU_ONLY = ("triton",)


def _strict_importorskip(modname: str, *args: Any, **kwargs: Any) -> ModuleType:
    if modname.split(".")[0] in GPU_ONLY:
        return _importorskip(modname, *args, **kwargs)
    return importlib.import_module(modname)  # under strict skips, missing is an error


_importorskip = pytest.importorskip
if STRICT:
    pytest.importorskip = _strict_importorskip  # type: ignore[assignment]


def missing_requirements(dist: str = "clawloop", extra: str = "test") -> list[str]:
    """The requirements of ``dist[extra]`` (extras of itself followed) not installed here, or
    installed at a version the requirement excludes, each with the extra that needs it."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    try:
        texts = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return [f"{dist} itself (pip install -e '.[{extra}]')"]
    missing: list[str] = []
    todo, seen = [extra], set()
    while todo:
        wanted = todo.pop()
        if wanted in seen:
            continue
        seen.add(wanted)
        for requirement in map(Requirement, texts):
            if requirement.marker is None or not requirement.marker.evaluate({"extra": wanted}):
                continue
            if canonicalize_name(requirement.name) == canonicalize_name(dist):
                todo.extend(requirement.extras)
                continue
            try:
                version = metadata.version(requirement.name)
            except metadata.PackageNotFoundError:
                missing.append(f"{requirement.name} (the [{wanted}] extra)")
                continue
            if not requirement.specifier.contains(version, prereleases=True):
                missing.append(f"{requirement.name} {version}, not {requirement.specifier}")
    return missing


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under strict skips, a [test] extra that did not fully install stops the run at once,
    naming what is missing, rather than failing its tests one by one."""
    if STRICT and (missing := missing_requirements()):
        pytest.exit(
            "CLAWLOOP_STRICT_SKIPS=1 and the [test] extra is not fully installed: missing "
            + "; ".join(missing)
            + ". Install it with: pip install -e '.[test]'",
            returncode=3,
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if STRICT and report.skipped and item.get_closest_marker("gpu") is None:
        reason = str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else "")
        # "no C compiler or no AVX2" may be this CPU: only a reason that names nothing else
        # but a missing part fails.
        if any(word in reason.lower() for word in MISSING) and " or no " not in reason:
            report.outcome = "failed"
            report.longrepr = f"skipped under CLAWLOOP_STRICT_SKIPS=1, which forbids it: {reason}"


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
