"""Per-host network: a command reaches the hosts it is allowed, through the proxy, and nothing else.

Every host here is a listener the test starts on the host's 127.0.0.1, which the sandbox's own
network namespace cannot reach except through the proxy; the listeners record every connection,
so "refused" is checked on the host side, not only from the command's output.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from sbx_support import Listener, running_listener

from agent.errors import ToolError, UserError
from sandbox import bwrap
from sandbox.egress import EgressProxy, parse_host
from sandbox.execute import CommandResult
from sandbox.relay_build import RELAY_VARIABLE
from sandbox.runner import Grant, SandboxRunner
from sandbox.settings import ResourceLimits, SandboxSettings


@pytest.fixture
def second() -> Iterator[Listener]:
    """Another listener on 127.0.0.1, on another port (the "server B" nobody declared)."""
    with running_listener() as lis:
        yield lis


def run_with_hosts(workspace: Path, hosts: list[str], script: str) -> CommandResult:
    settings = SandboxSettings(mode="read-only", limits=ResourceLimits(timeout_s=20))
    runner = SandboxRunner(settings, workspace, dict(os.environ), grant=Grant(network=hosts))
    return runner.run(["bash", "-c", script])


def test_only_the_declared_host_and_port_is_reached(
    workspace: Path, listener: Listener, second: Listener
) -> None:
    a, b = listener.port, second.port
    result = run_with_hosts(
        workspace,
        [f"127.0.0.1:{a}"],
        f"""
        echo "b: $(curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{b}/)"
        echo "b-tunnel: $(curl -s -p -o /dev/null -w '%{{http_connect}}' http://127.0.0.1:{b}/)"
        curl -s -m 5 http://127.0.0.1:{a}/plain; echo "a: $?"
        curl -s -m 5 -p http://127.0.0.1:{a}/tunnel; echo "a-tunnel: $?"
        curl -s -m 5 --noproxy '*' http://127.0.0.1:{a}/; echo "a-direct: $?"
        (exec 3<>/dev/tcp/127.0.0.1/{b}) 2>/dev/null; echo "b-raw: $?"
        nc -z -w 2 127.0.0.1 {a}; echo "a-raw: $?"
        """,
    )
    out = result.stdout
    assert "b: 403" in out and "b-tunnel: 403" in out, out
    # Both ways through the proxy reach A (the listener hangs up at once: curl's 52).
    assert "a: 52" in out and "a-tunnel: 52" in out, out
    assert "a-direct: 7" in out and "b-raw: 1" in out and "a-raw: 1" in out, out
    assert listener.hits.count("tcp") == 2, listener.hits  # the proxy's two, no direct one
    assert second.hits == []
    assert any(f"network refused: 127.0.0.1:{b}" in n for n in result.notes), result.notes


def test_a_name_that_resolves_to_loopback_is_refused(workspace: Path, listener: Listener) -> None:
    # Declaring a name is not declaring the address it resolves to: only a literal address
    # lets a command reach loopback or the local network.
    result = run_with_hosts(
        workspace,
        [f"localhost:{listener.port}"],
        f"curl -s -o /dev/null -w '%{{http_code}}' http://localhost:{listener.port}/",
    )
    assert result.stdout == "403"
    assert listener.hits == []
    assert any("non-public address" in n for n in result.notes), result.notes


def test_any_host_still_means_no_loopback(workspace: Path, listener: Listener) -> None:
    result = run_with_hosts(
        workspace,
        ["*"],
        f"curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{listener.port}/",
    )
    assert result.stdout == "403"
    assert listener.hits == []


def test_without_hosts_there_is_no_proxy_and_no_network(
    workspace: Path, listener: Listener
) -> None:
    result = run_with_hosts(
        workspace,
        [],
        f'echo "[$http_proxy]"; curl -s -m 3 http://127.0.0.1:{listener.port}/; echo rc=$?',
    )
    assert "[]" in result.stdout and "rc=7" in result.stdout
    assert listener.hits == []


def test_the_proxy_refuses_what_is_not_a_proxy_request(listener: Listener) -> None:
    with EgressProxy.for_hosts([f"127.0.0.1:{listener.port}"]) as proxy:
        assert proxy.socket_path is not None
        for request in (
            f"GET /relative HTTP/1.1\r\nHost: 127.0.0.1:{listener.port}\r\n\r\n",
            f"GET http://user@127.0.0.1:{listener.port}/ HTTP/1.1\r\n\r\n",
            f"CONNECT 127.0.0.1:{listener.port + 1} HTTP/1.1\r\n\r\n",
        ):
            client = socket.socket(socket.AF_UNIX)
            client.connect(str(proxy.socket_path))
            client.sendall(request.encode())
            reply = client.recv(200)
            client.close()
            assert reply.startswith((b"HTTP/1.1 400", b"HTTP/1.1 403")), (request, reply)
    assert listener.hits == []


def test_host_entries_are_checked() -> None:
    assert parse_host("api.example.org").ports == (80, 443)
    assert parse_host("API.Example.org.:8443").host == "api.example.org"
    assert parse_host("[::1]:8080").host == "::1" and parse_host("[::1]:8080").ports == (8080,)
    wild = parse_host("*.example.org")
    assert wild.matches("a.example.org", 443) and not wild.matches("example.org", 443)
    assert not wild.matches("evilexample.org", 443)
    assert parse_host("*").matches("any.example.org", 22)  # any host, still public only
    assert parse_host("127.0.0.1:9").matches("127.0.0.1", 9)
    assert not parse_host("127.0.0.1:9").matches("127.0.0.2", 9)
    for bad in ("", "http://x.org", "a b", "x.org:http", "x.org:70000", "[::1", "a..b"):
        with pytest.raises(UserError):
            parse_host(bad)


def test_no_python_for_the_relay_is_a_refusal_not_open_network(
    workspace: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    # relay.py, as where no C compiler built relay.c; then python3 must be in the view.
    monkeypatch.setenv(RELAY_VARIABLE, "python")
    monkeypatch.setattr(bwrap, "SAFE_PATH", "/nonexistent")  # where the relay's python is sought
    # The runner's start-up check already meets it: the model is told the command did not run.
    with pytest.raises(ToolError, match="without either a command gets no network at all"):
        run_with_hosts(
            workspace, [f"127.0.0.1:{listener.port}"], f"curl -s 127.0.0.1:{listener.port}"
        )
    assert listener.hits == []
