"""A SearxNG-compatible search endpoint: the query URL, and its JSON answer as lines."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from agent.errors import ToolError

_SNIPPET = 300


def query_url(endpoint: str, query: str) -> str:
    """``endpoint`` with ``q`` and ``format=json`` added to whatever query it already has."""
    parts = urlsplit(endpoint)
    params = [*parse_qsl(parts.query), ("q", query), ("format", "json")]
    return urlunsplit(parts._replace(query=urlencode(params)))


def parse(body: bytes, limit: int) -> list[str]:
    """Up to ``limit`` results as ``title | url | snippet`` lines."""
    try:
        data = json.loads(body)
    except ValueError:
        raise ToolError(
            "the search engine did not answer in JSON; is search_url its JSON API?"
        ) from None
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise ToolError("the search engine's answer has no results list")
    lines = []
    for item in results[:limit]:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        title = _one_line(item.get("title"))
        snippet = _one_line(item.get("content"))
        if len(snippet) > _SNIPPET:
            snippet = snippet[: _SNIPPET - 3] + "..."
        lines.append(f"{title} | {item['url']} | {snippet}")
    return lines


def _one_line(value: object) -> str:
    return " ".join(str(value).split()) if value is not None else ""
