"""The network relay inside the sandbox: compiled from relay.c, or relay.py where it cannot be.

A command with declared hosts reaches them through ``127.0.0.1:3128`` inside its own network
namespace, where the relay passes each connection to clawloop's filtering proxy. Every server
here is one the test starts on the host's 127.0.0.1. The module also runs as an unprivileged
user (``test_sandbox_as_user``).
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agent.host import c_compiler
from sandbox import helper_build, relay_build
from sandbox.doctor import checks
from sandbox.execute import CommandResult
from sandbox.relay_build import RELAY_VARIABLE, compiled_relay
from sandbox.runner import Grant, SandboxRunner
from sandbox.settings import ResourceLimits, SandboxSettings

GREETING = "hello through the relay"
BIG = 5 * 1024 * 1024


class _Greeter(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"{GREETING} {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_port() -> Iterator[int]:
    """A real HTTP server on the host's 127.0.0.1."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Greeter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def echo_after_end() -> Iterator[tuple[int, list[str]]]:
    """A TCP server on 127.0.0.1 that reads until the client ends its writing (half-close),
    then sends back everything it got and closes; it records the sha256 of what it got."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[str] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                got = bytearray()
                while data := conn.recv(65536):
                    got += data
                seen.append(hashlib.sha256(got).hexdigest())
                conn.sendall(got)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield int(listener.getsockname()[1]), seen
    finally:
        listener.close()


def _run(workspace: Path, hosts: list[str], script: str, **view: list[str]) -> CommandResult:
    settings = SandboxSettings(limits=ResourceLimits(timeout_s=30, processes=64, memory_mb=1024))
    runner = SandboxRunner(
        settings, workspace, dict(os.environ), grant=Grant(network=hosts, **view)
    )
    return runner.run(["bash", "-c", script])


def _python_shown() -> str:
    # Builtins only: in a view of curl alone there is no ls or test program to ask.
    return "[ -e /usr/bin/python3 ] || [ -e /bin/python3 ] && echo python:shown || echo python:none"


def test_the_compiled_relay_needs_no_python_in_the_view(workspace: Path, http_port: int) -> None:
    relay = compiled_relay()
    assert relay is not None, "cc built no relay here (the CI machines have gcc)"
    result = _run(
        workspace,
        [f"127.0.0.1:{http_port}"],
        f"curl -s -m 10 http://127.0.0.1:{http_port}/first; echo; {_python_shown()}",
        programs=["curl"],
    )
    assert result.exit_code == 0, result.stderr
    assert f"{GREETING} /first" in result.stdout, result.stdout
    assert "python:none" in result.stdout, result.stdout


def test_many_connections_at_once_through_the_compiled_relay(
    workspace: Path, http_port: int
) -> None:
    assert compiled_relay() is not None
    url = f"http://127.0.0.1:{http_port}"
    fetches = " ".join(f"curl -s -m 10 -o /tmp/n{i} {url}/n{i} &" for i in range(12))
    shown = "for i in $(seq 0 11); do cat /tmp/n$i; echo; done"
    result = _run(workspace, [f"127.0.0.1:{http_port}"], f"{fetches} wait; {shown}")
    assert result.exit_code == 0, result.stderr
    for i in range(12):
        assert f"{GREETING} /n{i}\n" in result.stdout, result.stdout


def test_relay_py_is_the_fallback(
    workspace: Path, http_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on a machine where no C compiler built relay.c: the variable chooses relay.py.
    monkeypatch.setenv(RELAY_VARIABLE, "python")
    assert compiled_relay() is None
    result = _run(
        workspace,
        [f"127.0.0.1:{http_port}"],
        f"curl -s -m 10 http://127.0.0.1:{http_port}/fallback; echo; {_python_shown()}",
        programs=["curl"],
    )
    assert result.exit_code == 0, result.stderr
    assert f"{GREETING} /fallback" in result.stdout, result.stdout
    assert "python:shown" in result.stdout, result.stdout  # relay.py's python3, in the view


@pytest.mark.parametrize("relay", ["compiled", "python"])
def test_half_close_and_five_megabytes_both_ways(
    workspace: Path,
    echo_after_end: tuple[int, list[str]],
    relay: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """nc ends its writing after the 5 MB (``-N``); the server answers only after that end
    arrives, and the whole answer must still come back through the half-closed connection."""
    if relay == "python":
        monkeypatch.setenv(RELAY_VARIABLE, "python")
    assert (compiled_relay() is not None) == (relay == "compiled")
    port, seen = echo_after_end
    script = (
        f"head -c {BIG} /dev/urandom > /tmp/sent; "
        f"nc -N -w 20 -X connect -x 127.0.0.1:3128 127.0.0.1 {port} < /tmp/sent > /tmp/back; "
        "echo rc=$?; sha256sum /tmp/sent /tmp/back; stat -c 'size=%s' /tmp/back"
    )
    result = _run(workspace, [f"127.0.0.1:{port}"], script)
    assert "rc=0" in result.stdout, (result.stdout, result.stderr)
    assert f"size={BIG}" in result.stdout, result.stdout
    sums = [line.split()[0] for line in result.stdout.splitlines() if "/tmp/" in line]
    assert len(sums) == 2 and sums[0] == sums[1], result.stdout
    assert seen == [sums[0]]  # the server got all of it, and then its end


def test_a_dynamically_linked_relay_gets_its_libraries_in_the_view(
    workspace: Path, http_port: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on a machine without a static libc: the relay, bound apart from its cache folder,
    # starts with the loader and libc of the view (curl's too, so this shows that it starts,
    # not which declaration brought them).
    compiler = c_compiler()
    assert compiler is not None
    binary = tmp_path / "relay-dynamic"
    source = relay_build.SOURCE.read_bytes()
    assert helper_build.compile_helper("relay", source, compiler, False, binary)
    dynamic = relay_build.CompiledRelay(binary, static=False)
    monkeypatch.setattr(relay_build, "_built", lambda: dynamic)
    assert compiled_relay() == dynamic
    result = _run(
        workspace,
        [f"127.0.0.1:{http_port}"],
        f"curl -s -m 10 http://127.0.0.1:{http_port}/dynamic; echo; {_python_shown()}",
        programs=["curl"],
    )
    assert result.exit_code == 0, result.stderr
    assert f"{GREETING} /dynamic" in result.stdout, result.stdout
    assert "python:none" in result.stdout, result.stdout


def test_doctor_says_which_relay_is_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    hosts = next(c for c in checks() if c.name == "a skill's hosts")
    assert hosts.holds and "relay.c, " in hosts.detail, hosts.detail
    monkeypatch.setenv(RELAY_VARIABLE, "python")
    hosts = next(c for c in checks() if c.name == "a skill's hosts")
    assert hosts.holds and "relay.py under python3" in hosts.detail, hosts.detail
