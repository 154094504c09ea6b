"""``web_fetch`` against a real HTTP server on 127.0.0.1, declared as a host in ``[web]``:
readable text, the byte, time and redirect bounds, the egress rules on every hop, the
permission rules, and the page's label through the real agent loop."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from page_server import PageServer

from agent.errors import ToolError
from agent.events import ToolResultEvent
from agent.loop import AgentLoop
from agent.messages import AssistantMessage, ToolCall, ToolMessage
from agent.provenance import Provenance
from agent.run_context import RunContext
from agent.session import Session
from agent.tools import Toolbox, ToolResult
from backends.fake import FakeBackend
from sandbox.flow import FlowSettings
from sandbox.settings import SandboxSettings
from skills.context import SkillContext
from skills.guard import GuardedTool
from skills.toolbox import build_toolbox
from skills.web.config import WebSettings


@pytest.fixture
def site() -> Iterator[PageServer]:
    with PageServer() as server:
        yield server


@pytest.fixture
def other() -> Iterator[PageServer]:
    """A second server on another loopback port, declared nowhere."""
    with PageServer() as server:
        yield server


def web_toolbox(
    tmp_path: Path,
    hosts: list[str],
    sandbox: SandboxSettings | None = None,
    **web: Any,
) -> Toolbox:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    settings = WebSettings(enabled=True, hosts=hosts, **web)
    context = SkillContext.create(
        ws, sandbox or SandboxSettings(backend="off"), environ={}, options={"web": settings}
    )
    return build_toolbox(context, None, ["web"], check_sandbox=False)


def fetch_tool(box: Toolbox) -> GuardedTool:
    tool = box.get("web_fetch")
    assert isinstance(tool, GuardedTool)
    return tool


def fetch(box: Toolbox, url: str) -> ToolResult:
    return fetch_tool(box).call({"url": url})


def declared(site: PageServer) -> list[str]:
    return [f"127.0.0.1:{site.port}"]


# The user allowed every fetch without asking: what still refuses is the egress rules.
EVERY_FETCH = SandboxSettings(backend="off", allow=["web.fetch"])


def test_the_web_tools_exist_only_once_enabled(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    context = SkillContext.create(ws, SandboxSettings(backend="off"), environ={})
    assert build_toolbox(context, None, ["web"], check_sandbox=False).names() == []
    assert web_toolbox(tmp_path, ["*"]).names() == ["web_fetch"]


@pytest.mark.parametrize("extractor", ["trafilatura", "standard library"])
def test_an_html_page_is_read_as_its_text_without_scripts_or_styles(
    tmp_path: Path, site: PageServer, extractor: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if extractor == "trafilatura":
        pytest.importorskip("trafilatura", reason="the web extra is not installed")
    else:
        monkeypatch.setitem(sys.modules, "trafilatura", None)  # as if the extra were missing
    result = fetch(web_toolbox(tmp_path, declared(site)), site.url("/article"))
    text = result.render()
    assert "thirteen metres" in text and "Grand Bé" in text and "Tide tables" in text
    for marker in ("script-should-not-appear", "inline-script-marker", "secret-style-marker"):
        assert marker not in text
    assert "<p>" not in text and "<article>" not in text
    assert f"{site.url('/article')} (HTTP 200, text/html" in text
    if extractor == "trafilatura":
        assert "About" not in text  # the navigation is not the page's text


def test_plain_text_and_json_come_as_they_are(tmp_path: Path, site: PageServer) -> None:
    box = web_toolbox(tmp_path, declared(site))
    assert "  plain <b>text</b>, as it is\n" in fetch(box, site.url("/plain")).content[1].text
    assert fetch(box, site.url("/json")).content[1].text == '{"tide": "high", "at": "14:02"}'


def test_a_binary_type_is_refused_with_a_message(tmp_path: Path, site: PageServer) -> None:
    with pytest.raises(ToolError, match=r"is image/png, 4104 bytes, not text: web_fetch reads"):
        fetch(web_toolbox(tmp_path, declared(site)), site.url("/png"))


def test_redirects_are_followed_up_to_the_bound_and_no_further(
    tmp_path: Path, site: PageServer
) -> None:
    box = web_toolbox(tmp_path, declared(site), max_redirects=3)
    result = fetch(box, site.url("/chain/3"))
    assert "the end of the chain" in result.render() and "redirected 3 times" in result.render()
    assert result.provenance == Provenance.web(site.url("/chain/0"))
    site.paths.clear()
    with pytest.raises(ToolError, match=r"redirected more than 3 times \(the limit\)"):
        fetch(box, site.url("/chain/4"))
    assert site.paths == ["/chain/4", "/chain/3", "/chain/2", "/chain/1"]


def test_a_redirect_to_an_undeclared_loopback_port_is_refused(
    tmp_path: Path, site: PageServer, other: PageServer
) -> None:
    box = web_toolbox(tmp_path, declared(site))
    with pytest.raises(ToolError) as caught:
        fetch(box, site.url(f"/to?url={other.url('/plain')}"))
    message = caught.value.message
    assert f"redirected to {other.url('/plain')}, which was not fetched" in message
    assert f"127.0.0.1:{other.port}: not a declared network host" in message
    assert other.paths == []


def test_an_undeclared_loopback_url_is_refused_before_any_connection(
    tmp_path: Path, site: PageServer, other: PageServer
) -> None:
    with pytest.raises(ToolError, match=r"refused by the sandbox.*not a declared network host"):
        fetch(web_toolbox(tmp_path, declared(site), sandbox=EVERY_FETCH), other.url("/plain"))
    assert other.paths == []


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data/", "a non-public address that was not declared"),
        ("http://10.20.30.40:8080/admin", "a non-public address that was not declared"),
        ("http://127.0.0.1:{other}/plain", "a non-public address that was not declared"),
        ("http://[::1]:{other}/plain", "a non-public address that was not declared"),
        # A name is judged by the address it resolves to, not by how it reads.
        ("http://localhost:{other}/plain", "it resolves only to a non-public address"),
    ],
)
def test_any_public_host_never_opens_a_non_public_address_even_by_redirect(
    tmp_path: Path, site: PageServer, other: PageServer, target: str, reason: str
) -> None:
    # "*" lets a fetch reach any public host; the declared loopback server is the only way in.
    box = web_toolbox(tmp_path, [*declared(site), "*"], sandbox=EVERY_FETCH)
    location = target.format(other=other.port)
    with pytest.raises(ToolError, match=reason):
        fetch(box, site.url(f"/to?url={location}"))
    with pytest.raises(ToolError, match=reason):
        fetch(box, location)
    assert other.paths == []


def test_a_huge_body_is_read_only_up_to_the_byte_bound(tmp_path: Path, site: PageServer) -> None:
    box = web_toolbox(tmp_path, declared(site), max_bytes=100_000, max_chars=5_000)
    result = fetch(box, site.url("/huge"))
    head, page = result.content[0].text, result.content[1].text
    assert "only the first 100000 bytes were read" in head
    assert "text cut at 5000 of 100000 characters" in head
    assert len(page) == 5_000 and page.startswith("all work and no play")


def test_a_slow_server_is_cut_off_at_the_time_bound(tmp_path: Path, site: PageServer) -> None:
    box = web_toolbox(tmp_path, declared(site), timeout_s=1.0)
    began = time.monotonic()
    with pytest.raises(ToolError, match=r"did not finish within 1 s \(the time limit\)"):
        fetch(box, site.url("/slow"))
    assert time.monotonic() - began < 3.0


def test_only_http_urls_without_credentials_are_fetched(tmp_path: Path, site: PageServer) -> None:
    box = web_toolbox(tmp_path, declared(site), sandbox=EVERY_FETCH)
    with pytest.raises(ToolError, match="only http:// and https://"):
        fetch(box, "file:///etc/passwd")
    with pytest.raises(ToolError, match="user name or password"):
        fetch(box, f"http://me:pw@127.0.0.1:{site.port}/plain")


def test_declared_hosts_are_allowed_and_any_other_fetch_asks(
    tmp_path: Path, site: PageServer
) -> None:
    url = site.url("/plain")
    assert fetch_tool(web_toolbox(tmp_path, declared(site))).decide({"url": url}).action == "allow"
    open_web = fetch_tool(web_toolbox(tmp_path, ["*"]))
    assert open_web.decide({"url": url}).action == "ask"
    assert open_web.decide({"url": "https://docs.python.org/3/"}).action == "ask"
    # Nobody to ask outside a run: refused, and the server never sees the request.
    with pytest.raises(ToolError):
        open_web.call({"url": url})
    assert site.paths == []
    # The user's own rules come first.
    user = SandboxSettings(backend="off", deny=[f"web.fetch(127.0.0.1:{site.port})"])
    denied = fetch_tool(web_toolbox(tmp_path, declared(site), sandbox=user))
    assert denied.decide({"url": url}).action == "deny"
    # A deny naming a host without a port holds on every port; an allow only on 80 and 443.
    user = SandboxSettings(backend="off", deny=["web.fetch(127.0.0.1)"])
    denied = fetch_tool(web_toolbox(tmp_path, ["*"], sandbox=user))
    assert denied.decide({"url": url}).action == "deny"
    user = SandboxSettings(backend="off", allow=["web.fetch(127.0.0.1)"])
    assert fetch_tool(web_toolbox(tmp_path, ["*"], sandbox=user)).decide({"url": url}).action == (
        "ask"
    )


def test_a_url_carrying_a_canary_is_refused_by_the_tripwire(
    tmp_path: Path, site: PageServer
) -> None:
    canary = "CANARY-5d1e"
    sandbox = SandboxSettings(backend="off", dataflow=FlowSettings(canaries=[canary]))
    box = web_toolbox(tmp_path, declared(site), sandbox=sandbox)
    with pytest.raises(ToolError, match="canary"):
        fetch(box, site.url(f"/plain?leak={canary}"))
    assert site.paths == []


def test_a_fetched_page_reaches_the_model_labelled_as_the_web_page(
    tmp_path: Path, site: PageServer
) -> None:
    url = site.url("/article")
    backend = FakeBackend(
        [
            AssistantMessage(tool_calls=[ToolCall.make("web_fetch", {"url": url})]),
            AssistantMessage(content="The tide rises by thirteen metres."),
        ]
    )
    session = Session()
    loop = AgentLoop(backend, web_toolbox(tmp_path, declared(site)))
    events = list(loop.run(session, "How high is the tide at Saint-Malo?", RunContext()))
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result.ok and result.provenance == Provenance.web(url)
    message = next(m for m in session.messages if isinstance(m, ToolMessage))
    assert message.provenance == Provenance.web(url) and not message.provenance.trusted
    assert "<untrusted-content>" in message.content and "thirteen metres" in message.content
    # The label lives beside the text; the model's request carries none of it.
    sent = backend.requests[-1].messages
    assert all("provenance" not in m.to_wire() for m in sent)


def test_web_search_asks_the_configured_engine_and_labels_its_results(
    tmp_path: Path, site: PageServer
) -> None:
    # The engine is reachable though no host is declared: configuring it declares it.
    box = web_toolbox(tmp_path, ["*"], search_url=site.url("/search?language=en"))
    tool = box.get("web_search")
    assert isinstance(tool, GuardedTool)
    result = tool.call({"query": "tide saint malo"})
    assert site.paths == ["/search?language=en&q=tide+saint+malo&format=json"]
    assert result.content[0].text == "2 results for 'tide saint malo' (title | url | snippet):"
    assert result.content[1].untrusted
    assert "Saint-Malo tides | https://tides.example/saint-malo | High water at 14:02." in (
        result.content[1].text
    )
    assert result.provenance == Provenance.web(site.url("/search?language=en"))
    # The engine's host is open to the search alone, not to fetches.
    with pytest.raises(ToolError):
        fetch(web_toolbox(tmp_path, ["*"], sandbox=EVERY_FETCH), site.url("/plain"))
