"""Shared fixtures for the gateway tests: a workspace the sandbox's uid can reach."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_telegram import FakeTelegram
from loopthread import LoopThread


@pytest.fixture
def ws() -> Iterator[Path]:
    """A workspace straight under the temp folder.

    pytest's own folders are 0700 and re-chmodded by every pytest run on the machine, which
    resets the ACL that lets the sandbox's unprivileged uid through them.
    """
    folder = Path(tempfile.mkdtemp(prefix="clawloop-ws-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def lt() -> Iterator[LoopThread]:
    """An asyncio loop on its own thread, for the fake servers and the connectors."""
    thread = LoopThread()
    yield thread
    thread.close()


@pytest.fixture
def fake(lt: LoopThread) -> Iterator[FakeTelegram]:
    """A local Telegram Bot API server (the Discord tests override this with their own)."""
    server = FakeTelegram()
    lt.run(server.start())
    yield server
    lt.run(server.stop())
