"""The ``[web]`` config table: whether the web tools exist, where they may go, and their bounds.

``hosts`` are network entries as a skill's manifest writes them (``docs.python.org``,
``*.python.org``, ``127.0.0.1:8080``, ``*``); every hop of a fetch is held to them by the
sandbox's egress rules (:mod:`sandbox.egress`), so a loopback, private or link-local address is
reached only when an entry names it literally. A fetch from a host named here runs without
asking; ``*`` opens any public host, each fetch asking first.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sandbox.egress import check_hosts


class WebSettings(BaseModel):
    """Everything under ``[web]``."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=False, description="offer web_fetch (and web_search)")
    hosts: list[str] = Field(
        default_factory=lambda: ["*"],
        description='hosts a fetch may reach; "*": any public host (each fetch asks)',
    )
    max_bytes: int = Field(default=2_000_000, ge=1024, description="bytes read from a response")
    max_chars: int = Field(
        default=12_000, ge=200, description="characters of text the model reads from a page"
    )
    connect_timeout_s: float = Field(default=10.0, gt=0, description="per connection")
    timeout_s: float = Field(default=30.0, gt=0, description="for a whole fetch, redirects too")
    max_redirects: int = Field(default=5, ge=0, le=20)
    user_agent: str = "clawloop-web/0.1"
    search_url: str | None = Field(
        default=None,
        description="a SearxNG-compatible search endpoint, e.g. http://127.0.0.1:8888/search",
    )
    max_results: int = Field(default=8, ge=1, le=50, description="results web_search shows")

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        return check_hosts(hosts)

    @field_validator("search_url")
    @classmethod
    def _search_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"{url!r} is not an http(s) URL; write e.g. https://search.example/search"
            )
        return url

    def declared_hosts(self) -> list[str]:
        """The hosts named one by one (``*`` is not a declaration of any host)."""
        return [h for h in self.hosts if h.strip() != "*"]
