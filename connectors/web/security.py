"""Who may talk to the web page: the Host and Origin checks, the access token, the CSRF token.

The page can run commands on this machine, so any web site the person visits must not be able to
drive it. A page elsewhere can make the browser send requests here, so every request is checked:

- the Host header must name the address the server is bound to, which defeats DNS rebinding (a
  foreign name that resolves to 127.0.0.1 arrives with that foreign name as its Host);
- an Origin header, when the browser sends one, must be this server's own;
- with a token, every request carries it (a cookie set once from ``?token=``, or a header);
- every POST carries a CSRF token derived from the page's session name with a secret that never
  leaves the process, so only a page this server rendered can change anything.

Replies also forbid framing (a hidden frame must not click the approve button) and scripts
from anywhere but this server.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_COOKIE = "clawloop_web_token"
TOKEN_HEADER = "x-clawloop-token"
CSRF_HEADER = "x-csrf-token"
PAGE_HEADER = "x-clawloop-session"

HEADERS = [
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    ),
]


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """Whether ``host`` is the any-address (0.0.0.0, ::), which listens on every interface."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def host_names(host: str, port: int) -> set[str] | None:
    """The Host headers this server answers to: its bound address (and ``localhost`` when the
    address is loopback, a name no other site can resolve to it). None: any, for the
    any-address, reached by names this process cannot know; a token is required there, and a
    rebinding page, on a name of its own, never has it."""
    if is_wildcard(host):
        return None
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    names = {f"{shown}:{port}"}
    if is_loopback(host):
        names |= {f"localhost:{port}", f"127.0.0.1:{port}"}
    return names


@dataclass(slots=True)
class Guard:
    """The checks, with the secret the CSRF tokens are made with."""

    host: str
    port: int
    token: str | None = None
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    def csrf_for(self, session: str) -> str:
        """The CSRF token of the page showing ``session``."""
        return hmac.new(self.secret, session.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, session: str, token: str) -> bool:
        return bool(session) and hmac.compare_digest(self.csrf_for(session), token)

    def token_ok(self, presented: str | None) -> bool:
        return self.token is None or (
            presented is not None and hmac.compare_digest(presented, self.token)
        )


class GuardMiddleware:
    """Refuses (403) any request that fails one of the :class:`Guard`'s checks."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard
        self.hosts = host_names(guard.host, guard.port)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        problem = self._problem(scope, headers)
        if problem is not None:
            await _plain(send, 403, f"forbidden: {problem}\n")
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if self.guard.token is not None and "token" in query:
            await self._set_cookie_and_redirect(scope, query, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)

    def _problem(self, scope: Scope, headers: dict[str, str]) -> str | None:
        host = headers.get("host", "")
        if self.hosts is not None and host not in self.hosts:
            return "unexpected Host header"
        origin = headers.get("origin")
        if origin is not None and origin.removeprefix("http://") not in (self.hosts or {host}):
            return "request from another origin"
        presented = headers.get(TOKEN_HEADER) or _cookie(headers, TOKEN_COOKIE)
        if presented is None:
            presented = parse_qs(scope.get("query_string", b"").decode("latin-1")).get(
                "token", [None]
            )[0]
        if not self.guard.token_ok(presented):
            return "a token is required (open the address `agent web` printed)"
        if scope["method"] not in ("GET", "HEAD") and not self.guard.csrf_ok(
            headers.get(PAGE_HEADER, ""), headers.get(CSRF_HEADER, "")
        ):
            return "missing or wrong CSRF token (reload the page)"
        return None

    async def _set_cookie_and_redirect(
        self, scope: Scope, query: dict[str, list[str]], send: Send
    ) -> None:
        """The token moves from the address into a cookie, so it is not left in the history."""
        rest = {k: v for k, v in query.items() if k != "token"}
        location = scope["path"] + ("?" + urlencode(rest, doseq=True) if rest else "")
        cookie = f"{TOKEN_COOKIE}={self.guard.token}; Path=/; HttpOnly; SameSite=Strict"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode("latin-1")),
                    (b"set-cookie", cookie.encode("latin-1")),
                    *HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _cookie(headers: dict[str, str], name: str) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # a malformed cookie header is the same as none
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


async def _plain(send: Send, status: int, text: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), *HEADERS],
        }
    )
    await send({"type": "http.response.body", "body": text.encode()})
