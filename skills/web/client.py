"""A bounded HTTP GET whose every connection is opened by the sandbox's egress rules.

Each hop (the first request and every redirect) connects through
:meth:`sandbox.egress.EgressProxy.connect`, the very check the proxy applies to sandboxed
commands: the host must be declared, and the address the name resolves to must be public
unless an entry names that address literally. Redirects are followed here, one hop at a time,
so none escapes the check.

Three bounds hold whatever the server does: bytes read (the rest is left unread), time (per
connection, and one deadline for the whole fetch, redirects included, enforced by closing the
socket), and the number of redirects. Each refusal is a :class:`ToolError` the model reads.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from email.message import Message
from urllib.parse import quote, urljoin, urlsplit

from agent.errors import ToolError
from sandbox.egress import EgressProxy

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024
_SAFE_PATH = "/%:@!$&'()*+,;=-._~"
# The egress rules' reasons that are no refusal: nothing is there to reach.
_UNREACHABLE = frozenset({"the name does not resolve", "the connection failed"})


@dataclass(slots=True, frozen=True)
class Bounds:
    """How much a fetch may read, how long it may take, how many redirects it follows."""

    max_bytes: int = 2_000_000
    connect_timeout_s: float = 10.0
    timeout_s: float = 30.0
    max_redirects: int = 5


@dataclass(slots=True)
class Response:
    """What a fetch brought back: the final URL, its status and type, and at most the bound."""

    url: str
    status: int
    content_type: str  # lower case, without parameters; "" if the server named none
    charset: str | None
    body: bytes
    truncated: bool  # the body was longer than the bound and the rest was not read
    redirects: list[str] = field(default_factory=list)  # the URLs followed, in order


@dataclass(slots=True, frozen=True)
class _Target:
    scheme: str
    host: str
    port: int
    path: str

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def parse_url(url: str) -> _Target:
    """An http(s) URL's parts; anything else is a ToolError for the model."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise ToolError(f"{url!r} is not a valid URL") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ToolError(f"{url!r}: only http:// and https:// URLs can be fetched")
    if not parts.hostname:
        raise ToolError(f"{url!r} has no host name")
    if parts.username is not None or parts.password is not None:
        raise ToolError(f"{url!r}: URLs with a user name or password are not fetched")
    scheme = parts.scheme.lower()
    try:
        host = parts.hostname.rstrip(".").encode("idna").decode("ascii")
    except UnicodeError:
        raise ToolError(f"{url!r}: the host name is not valid") from None
    path = quote(parts.path or "/", safe=_SAFE_PATH)
    if parts.query:
        path += "?" + quote(parts.query, safe=_SAFE_PATH + "?")
    return _Target(scheme, host, port or (443 if scheme == "https" else 80), path)


def fetch(
    url: str,
    proxy: EgressProxy,
    bounds: Bounds,
    headers: dict[str, str] | None = None,
) -> Response:
    """GET ``url``, following at most ``bounds.max_redirects`` redirects, every hop checked."""
    deadline = time.monotonic() + bounds.timeout_s
    followed: list[str] = []
    current = url
    while True:
        try:
            response = _get(current, parse_url(current), proxy, bounds, deadline, headers or {})
        except ToolError as exc:
            if not followed:
                raise
            raise ToolError(
                f"{url} redirected to {current}, which was not fetched: {exc.message}"
            ) from None
        location = response.redirect_to
        if location is None:
            response.result.redirects = followed
            return response.result
        if len(followed) >= bounds.max_redirects:
            raise ToolError(
                f"{url} redirected more than {bounds.max_redirects} times (the limit); "
                f"the last hop pointed to {location}. Not followed."
            )
        followed.append(location)
        current = location


@dataclass(slots=True)
class _Hop:
    result: Response
    redirect_to: str | None


def _get(
    url: str,
    target: _Target,
    proxy: EgressProxy,
    bounds: Bounds,
    deadline: float,
    headers: dict[str, str],
) -> _Hop:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _timeout(url, bounds)
    sock = proxy.connect(target.host, target.port, min(bounds.connect_timeout_s, remaining))
    if isinstance(sock, str):
        where = f"{target.host}:{target.port}"
        if sock in _UNREACHABLE:
            raise ToolError(f"cannot fetch {url}: {sock} ({where})")
        raise ToolError(
            f"refused by the sandbox: {url} ({where}: {sock}). "
            "Do not retry; tell the user if this host is needed."
        )
    # One deadline for the whole fetch: a server that trickles bytes is cut off when it passes.
    watchdog = threading.Timer(max(deadline - time.monotonic(), 0.0), _shut, (sock,))
    watchdog.daemon = True
    watchdog.start()
    try:
        return _exchange(url, target, sock, bounds, deadline, headers)
    except (TimeoutError, OSError, http.client.HTTPException) as exc:
        if time.monotonic() >= deadline or isinstance(exc, TimeoutError):
            raise _timeout(url, bounds) from None
        raise ToolError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None
    finally:
        watchdog.cancel()
        sock.close()


def _exchange(
    url: str,
    target: _Target,
    sock: socket.socket,
    bounds: Bounds,
    deadline: float,
    headers: dict[str, str],
) -> _Hop:
    sock.settimeout(max(deadline - time.monotonic(), 0.001))
    if target.scheme == "https":
        sock = ssl.create_default_context().wrap_socket(sock, server_hostname=target.host)
    conn = http.client.HTTPConnection(target.host, target.port)
    conn.sock = sock  # already connected, to the address the rules checked
    sent = {"Host": target.authority, "Accept-Encoding": "identity", **headers}
    conn.request("GET", target.path, headers=sent)
    answer = conn.getresponse()
    if answer.status in _REDIRECTS and answer.getheader("Location"):
        location = urljoin(url, answer.getheader("Location", ""))
        return _Hop(Response(url, answer.status, "", None, b"", False), location)
    content_type, charset = _content_type(answer.msg)
    if content_type and not is_text(content_type):
        length = answer.getheader("Content-Length")
        size = f", {length} bytes" if length and length.isdigit() else ""
        raise ToolError(
            f"{url} is {content_type}{size}, not text: web_fetch reads text only "
            "(HTML, plain text, JSON, XML), so it was not downloaded."
        )
    body = bytearray()
    while len(body) <= bounds.max_bytes:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = answer.read(min(_CHUNK, bounds.max_bytes + 1 - len(body)))
        if not chunk:
            break
        body += chunk
    if time.monotonic() >= deadline:  # the watchdog closed the socket: the body is partial
        raise TimeoutError
    truncated = len(body) > bounds.max_bytes
    data = bytes(body[: bounds.max_bytes])
    if not content_type and b"\0" in data[:4096]:
        raise ToolError(f"{url} sent binary data with no type: web_fetch reads text only.")
    return _Hop(Response(url, answer.status, content_type, charset, data, truncated), None)


_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/ld+json",
        "application/xml",
        "application/xhtml+xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/rss+xml",
        "application/atom+xml",
        "application/x-ndjson",
        "application/csv",
    }
)


def is_text(content_type: str) -> bool:
    """Whether a type is text the model can read (``text/*``, JSON, XML and kin)."""
    return (
        content_type.startswith("text/")
        or content_type in _TEXT_TYPES
        or content_type.endswith(("+json", "+xml"))
    )


def _content_type(headers: Message) -> tuple[str, str | None]:
    raw = headers.get("Content-Type")
    if not raw:
        return "", None
    parsed = Message()
    parsed["Content-Type"] = raw
    charset = parsed.get_param("charset")
    return parsed.get_content_type().lower(), charset if isinstance(charset, str) else None


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _timeout(url: str, bounds: Bounds) -> ToolError:
    return ToolError(
        f"fetching {url} did not finish within {bounds.timeout_s:g} s (the time limit) and "
        "was stopped."
    )
