"""Shared fixtures for the gateway tests: the loop thread and the fake Telegram server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_telegram import FakeTelegram
from loopthread import LoopThread


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
