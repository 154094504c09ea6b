"""Fixtures for the skill tests: the real mail servers (see mail_servers.py), and the local fake
Telegram server of the connector tests, for the gateway's hot-reload test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mail_servers import dovecot

# The connector tests' fake Bot API server and loop thread, shared rather than copied.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "connectors"))

from fake_telegram import FakeTelegram
from loopthread import LoopThread

__all__ = ["dovecot", "fake"]


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    """A local Telegram Bot API server on 127.0.0.1, on its own event loop thread."""
    thread = LoopThread()
    server = FakeTelegram()
    thread.run(server.start())
    try:
        yield server
    finally:
        thread.run(server.stop())
        thread.close()
