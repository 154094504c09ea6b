"""How permission rules name a web call: ``web.fetch(HOST)``, with HOST a network entry.

A pattern is written as a network host is anywhere else (``docs.python.org``,
``*.python.org``, ``127.0.0.1:8080``) and is matched against the URL's host and port, so
``allow = ["web.fetch(docs.python.org)"]`` lets the model fetch from that host without asking.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.errors import ToolError, UserError
from sandbox.egress import DEFAULT_PORTS, HostRule, parse_host
from sandbox.rules import Kind
from skills.web.client import parse_url


@dataclass(slots=True, frozen=True)
class UrlHostSubject:
    """Patterns are network entries, matched against the host and port of a URL argument."""

    arg: str = "url"

    def matches(self, pattern: str, arguments: dict[str, Any], kind: Kind, workspace: Path) -> bool:
        target = _target(arguments.get(self.arg))
        if target is None:
            return False
        try:
            rule = parse_host(pattern)
        except UserError:
            return False
        if kind != "allow" and rule.ports == DEFAULT_PORTS:
            # A deny or ask naming a host without a port holds on every port of that host.
            rule = HostRule(rule.host, ())
        return rule.matches(target[0], target[1])

    def exact(self, arguments: dict[str, Any], workspace: Path) -> str:
        target = _target(arguments.get(self.arg))
        if target is None:  # no host: a pattern that matches no call, never "every call"
            return str(arguments.get(self.arg, "")) or "-"
        host, port = target
        shown = f"[{host}]" if ":" in host else host
        return shown if port in (80, 443) else f"{shown}:{port}"


def _target(url: object) -> tuple[str, int] | None:
    if not isinstance(url, str):
        return None
    try:
        parsed = parse_url(url)
    except ToolError:
        return None
    return parsed.host, parsed.port
