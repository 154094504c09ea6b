"""Per-host network for a sandboxed command: a filtering HTTP proxy on a Unix socket.

A command that may reach some hosts still gets a network namespace of its own with nothing but
loopback in it. The only way out is this proxy, which listens on a Unix socket outside the
sandbox; the socket is bound into the sandbox and a relay there (``relay.c``, built by
:mod:`sandbox.relay_build`, or :mod:`sandbox.relay` where it cannot be) makes it reachable
as ``127.0.0.1:3128``, named by ``http_proxy`` / ``https_proxy`` / ``all_proxy``.
A program that ignores those variables reaches nothing: there is no route out.

The proxy serves ``CONNECT host:port`` (HTTPS and anything tunnelled) and plain HTTP requests
in absolute form (``GET http://host:port/path``), only to the hosts allowed, and refuses the
rest with ``403``. It resolves names itself and connects to the address it checked, so a name
that resolves to a loopback, private, link-local or otherwise non-public address is refused
(no reaching the host's own services or the local network through a public name). Such an
address is allowed only when the allowed entry is that address literally (``127.0.0.1:8080``).

Allowed entries: ``host`` (ports 80 and 443), ``host:port``, ``*.example.org`` (its
subdomains, ports 80 and 443), ``*.example.org:port``, IP addresses (``[::1]:8080``), and
``*``: any public host on any port (still never a loopback or private address).

Connections are served by one bounded pool of threads for the whole process (one thread per
open connection, relaying both ways with ``select``), and each proxy (one per command or
server) holds at most ``max_connections`` open or waiting at once; past that a connection is
answered ``503`` and closed on the accepting thread. A command that opens thousands of
connections costs the agent a bounded number of threads, never one each.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import selectors
import socket
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from agent.errors import UserError

_log = logging.getLogger("clawloop.sandbox")
DEFAULT_PORTS = (80, 443)
_HEADER_LIMIT = 64 * 1024
_CONNECT_TIMEOUT_S = 10.0
_HEADER_TIMEOUT_S = 30.0
POOL_THREADS = 64  # serving threads for every proxy of this process together
MAX_CONNECTIONS = 32  # open or waiting connections of one proxy (one command or server)
_pool: ThreadPoolExecutor | None = None
_pool_guard = threading.Lock()


def _shared_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_guard:
        if _pool is None:
            _pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="egress-proxy")
        return _pool


@dataclass(slots=True, frozen=True)
class HostRule:
    """One allowed entry: a name (or ``*.`` suffix) or an address, and its ports."""

    host: str  # lower case, no trailing dot, no brackets; "*.example.org" for a suffix; "*"
    ports: tuple[int, ...]  # empty: any port

    @property
    def literal_ip(self) -> bool:
        return _ip(self.host) is not None

    def matches(self, host: str, port: int) -> bool:
        if self.ports and port not in self.ports:
            return False
        if self.host == "*":
            return True
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and host != self.host[2:]
        if self.literal_ip:
            other = _ip(host)
            return other is not None and other == _ip(self.host)
        return host == self.host


def parse_host(text: str) -> HostRule:
    """``host``, ``host:port``, ``*.domain[:port]``, ``1.2.3.4[:port]`` or ``[::1][:port]``."""
    raw = text.strip()
    if raw == "*":
        return HostRule("*", ())
    host, port = _split_host_port(raw)
    if host is None:
        raise UserError(f"network host {text!r} is not a host name or address")
    if port is not None and not 0 < port < 65536:
        raise UserError(f"network host {text!r} has an invalid port")
    if _ip(host) is None:
        name = host[2:] if host.startswith("*.") else host
        labels = name.split(".")
        if not name or not all(lab and all(c.isalnum() or c == "-" for c in lab) for lab in labels):
            raise UserError(
                f"network host {text!r} is not a host name: use a name like api.example.org, "
                "*.example.org, an address, and optionally :PORT"
            )
    return HostRule(host, (port,) if port is not None else DEFAULT_PORTS)


def check_hosts(hosts: list[str]) -> list[str]:
    """``hosts`` as given when each is a valid entry, for a config validator; else ValueError."""
    for host in hosts:
        try:
            parse_host(host)
        except UserError as exc:
            raise ValueError(exc.message) from None
    return hosts


def _split_host_port(raw: str) -> tuple[str | None, int | None]:
    """``(host, port)`` from ``host[:port]`` or ``[v6][:port]``; host None if malformed."""
    port: int | None = None
    if raw.startswith("["):
        end = raw.find("]")
        if end < 0:
            return None, None
        host, rest = raw[1:end], raw[end + 1 :]
        if rest:
            if not rest.startswith(":") or not rest[1:].isdigit():
                return None, None
            port = int(rest[1:])
        return (host.lower() if _ip(host) is not None else None), port
    if raw.count(":") > 1:  # a bare IPv6 address, no port
        return (raw.lower() if _ip(raw) is not None else None), None
    host, sep, rest = raw.partition(":")
    if sep:
        if not rest.isdigit():
            return None, None
        port = int(rest)
    host = host.lower().rstrip(".")
    return (host or None), port


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


@dataclass
class EgressProxy:
    """The proxy for one command: ``start()``, hand ``socket_path`` to the sandbox, ``stop()``.

    ``refused`` collects what was refused, for the note the model reads.
    """

    rules: list[HostRule]
    max_connections: int = MAX_CONNECTIONS
    refused: list[str] = field(default_factory=list)
    socket_path: Path | None = None
    _listener: socket.socket | None = None
    _folder: str | None = None
    _open: set[socket.socket] = field(default_factory=set)
    _guard: threading.Lock = field(default_factory=threading.Lock)
    _active: int = 0
    _turned_away: int = 0

    @classmethod
    def for_hosts(cls, hosts: list[str]) -> EgressProxy:
        return cls([parse_host(h) for h in hosts])

    def start(self) -> Path:
        """Listen on a Unix socket in a private folder; the socket itself is open to any uid
        (the command may run as the sandbox user), the folder only to us."""
        self._folder = tempfile.mkdtemp(prefix="clawloop-net-")
        path = Path(self._folder) / "proxy.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        os.chmod(path, 0o666)
        listener.listen(64)
        self._listener, self.socket_path = listener, path
        threading.Thread(
            target=self._accept, args=(listener,), name="egress-proxy", daemon=True
        ).start()
        return path

    def stop(self) -> None:
        """Close the listener and every connection still open."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._guard:
            open_now, self._open = list(self._open), set()
        for sock in open_now:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        if self._folder is not None:
            with contextlib.suppress(OSError):
                os.unlink(Path(self._folder) / "proxy.sock")
            with contextlib.suppress(OSError):
                os.rmdir(self._folder)
            self._folder = None

    def __enter__(self) -> EgressProxy:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def notes(self, shown: int = 5) -> list[str]:
        """What was refused, for the model: the first few, then how many more."""
        notes = [f"network refused: {what}" for what in self.refused[:shown]]
        if len(self.refused) > shown:
            notes.append(f"network refused {len(self.refused) - shown} more connections")
        if self._turned_away:
            notes.append(
                f"network refused {self._turned_away} connections over the limit of "
                f"{self.max_connections} open at once"
            )
        return notes

    def allowed(self, host: str, port: int) -> HostRule | None:
        return next((r for r in self.rules if r.matches(host, port)), None)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed by stop()
            with self._guard:
                full = self._active >= self.max_connections
                if not full:
                    self._active += 1
                    self._open.add(client)
            if full:
                self._turn_away(client)
                continue
            _shared_pool().submit(self._serve_counted, client)

    def _turn_away(self, client: socket.socket) -> None:
        """Refuse a connection past the limit without waiting on it (the accepting thread)."""
        if not self._turned_away:
            _log.warning("sandbox network: more than %s connections at once", self.max_connections)
        self._turned_away += 1
        client.setblocking(False)
        _reply(client, 503, "refused by the sandbox: too many connections at once")
        client.close()

    def _serve_counted(self, client: socket.socket) -> None:
        try:
            if self._listener is not None:  # not stopped while it waited for a thread
                self._serve(client)
        finally:
            with self._guard:
                self._active -= 1
            self._forget(client)

    def _track(self, sock: socket.socket) -> None:
        with self._guard:
            self._open.add(sock)

    def _forget(self, *socks: socket.socket) -> None:
        with self._guard:
            self._open.difference_update(socks)
        for sock in socks:
            sock.close()

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            client.settimeout(_HEADER_TIMEOUT_S)
            head, rest = _read_head(client)
            target = _target(head) if head is not None else None
            if target is None:
                return _reply(client, 400, "the proxy needs CONNECT host:port or an absolute URL")
            host, port, opening = target
            connected = self.connect(host, port)
            if isinstance(connected, str):
                self.refused.append(f"{host}:{port} ({connected})")
                _log.warning("sandbox network: refused %s:%s (%s)", host, port, connected)
                return _reply(client, 403, f"refused by the sandbox: {host}:{port} {connected}")
            upstream = connected
            self._track(upstream)
            client.settimeout(None)
            if opening is None:  # CONNECT: the client speaks first, through the tunnel
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream.sendall(opening)
            if rest:
                upstream.sendall(rest)
            _relay(client, upstream, lambda: self._listener is None)
        except OSError:
            pass
        finally:
            self._forget(client, *([upstream] if upstream is not None else []))

    def connect(
        self, host: str, port: int, timeout: float = _CONNECT_TIMEOUT_S
    ) -> socket.socket | str:
        """A connection to an address checked against the rules, or why not.

        The proxy serves every request through this; a client in clawloop's own process (the
        ``web`` skill) calls it directly, so there is one implementation of the rules.
        """
        rule = self.allowed(host, port)
        if rule is None:
            return "not a declared network host"
        literal = _ip(host)
        if literal is not None:
            # Only an entry naming this very address opens a non-public one ("*" does not).
            if not rule.literal_ip and not _public(literal):
                return "a non-public address that was not declared as such"
            candidates = [literal]
        else:
            try:
                infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError:
                return "the name does not resolve"
            candidates = [a for a in (_ip(str(i[4][0]).split("%")[0]) for i in infos) if a]
            candidates = [a for a in candidates if _public(a)]
            if not candidates:
                return "it resolves only to a non-public address"
        for address in candidates:
            try:
                return socket.create_connection((str(address), port), timeout=timeout)
            except OSError:
                continue
        return "the connection failed"


def _read_head(
    sock: socket.socket,
) -> tuple[tuple[str, str, str, list[bytes]] | None, bytes]:
    """The request line and header lines, and whatever bytes came after them."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk or len(data) > _HEADER_LIMIT:
            return None, b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    parts = lines[0].decode("latin-1").split(" ")
    if len(parts) != 3:
        return None, b""
    return (parts[0].upper(), parts[1], parts[2], lines[1:]), rest


def _target(head: tuple[str, str, str, list[bytes]]) -> tuple[str, int, bytes | None] | None:
    """Where a request goes, and for plain HTTP the request head to send there (origin form,
    the proxy's own headers dropped, the connection closed after one answer)."""
    method, target, version, headers = head
    if method == "CONNECT":
        host, port = _split_host_port(target)
        return (host, port or 443, None) if host is not None else None
    host, port, path = _absolute(target)
    if host is None or port is None:
        return None
    kept = [h for h in headers if not h.lower().startswith((b"proxy-", b"connection:"))]
    request = b" ".join([method.encode(), path.encode(), version.encode()])
    return host, port, b"\r\n".join([request, *kept, b"Connection: close", b"", b""])


def _absolute(target: str) -> tuple[str | None, int | None, str]:
    """Host, port and path of ``http://host[:port]/path``."""
    if not target.lower().startswith("http://"):
        return None, None, ""
    authority, slash, path = target[7:].partition("/")
    if "@" in authority:
        return None, None, ""
    host, port = _split_host_port(authority)
    return host, port or 80, slash + path if slash else "/"


def _reply(sock: socket.socket, code: int, text: str) -> None:
    body = (text + "\n").encode()
    status = {400: "Bad Request", 403: "Forbidden", 503: "Service Unavailable"}[code]
    head = f"HTTP/1.1 {code} {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}"
    with contextlib.suppress(OSError):
        sock.sendall(head.encode() + b"\r\nConnection: close\r\n\r\n" + body)


def _relay(a: socket.socket, b: socket.socket, stopped: Callable[[], bool]) -> None:
    """Copy both ways, on this one thread, until both sides are done or the proxy stopped.

    The pool's threads are waited for when the process exits, so a tunnel whose far side
    never ends must still end with its proxy.
    """
    with selectors.DefaultSelector() as sel:
        sel.register(a, selectors.EVENT_READ, b)
        sel.register(b, selectors.EVENT_READ, a)
        while sel.get_map() and not stopped():
            for key, _ in sel.select(timeout=0.5):
                src, dst = key.fileobj, key.data
                assert isinstance(src, socket.socket)  # registered above
                try:
                    data = src.recv(65536)
                    if data:
                        dst.sendall(data)
                        continue
                except OSError:
                    pass
                sel.unregister(src)  # this side is done: pass its end on
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
