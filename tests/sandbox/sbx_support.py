"""Helpers shared by the sandbox tests (imported by name: the tests folder is not a package)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.execute import CommandResult

FAKE_SECRET = "clawloop-fake-secret-4b1d9e"
RunFn = Callable[..., CommandResult]


@dataclass
class Listener:
    """A TCP and a UDP socket on 127.0.0.1 that record whoever reaches them."""

    tcp: socket.socket
    udp: socket.socket
    hits: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def port(self) -> int:
        return int(self.tcp.getsockname()[1])

    @property
    def udp_port(self) -> int:
        return int(self.udp.getsockname()[1])

    def serve(self) -> None:
        self.tcp.settimeout(0.05)
        self.udp.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = self.tcp.accept()
                self.hits.append("tcp")
                conn.close()
            except OSError:
                pass
            try:
                self.udp.recv(100)
                self.hits.append("udp")
            except OSError:
                pass


@contextlib.contextmanager
def running_listener() -> Iterator[Listener]:
    """A :class:`Listener` on fresh 127.0.0.1 ports, served on a thread until the block ends."""
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(16)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    lis = Listener(tcp, udp)
    thread = threading.Thread(target=lis.serve, daemon=True)
    thread.start()
    try:
        yield lis
    finally:
        lis._stop.set()
        thread.join(2)
        tcp.close()
        udp.close()


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line (arguments joined by spaces) holds ``marker``.

    Sandboxed commands live in their own pid namespace, but the host sees every one of them.
    """
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline.replace(b"\0", b" "):
            found.append(int(entry))
    return found


def gone(marker: str, within: float = 5.0) -> list[int]:
    """Wait until no host process carries ``marker``; return those still there at the end.

    A pid namespace is torn down asynchronously after its first process dies.
    """
    deadline = time.monotonic() + within
    while True:
        left = processes_with(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)
