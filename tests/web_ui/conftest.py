"""`agent web`'s app as the command wires it, on a real uvicorn server on 127.0.0.1, and a real
headless Chromium driven by Selenium.

The model is the scripted fake of the connector tests: ``run: CMD`` makes it call the shell with
``CMD`` (which asks, under the default rules), a tool result gets ``done: <result>``, anything
else ``echo: <text>``. The shell runs in the real bubblewrap sandbox.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from cli.config import Settings, load_settings
from cli.web_cmd import web_app
from tests.connectors.harness import fake_backend

WAIT_S = 20.0
SCREENSHOTS = "CLAWLOOP_WEB_SCREENSHOTS"  # a folder: the browser tests save the docs' pictures


@dataclass
class WebServer:
    url: str
    host: str
    port: int
    settings: Settings
    workspace: Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(app: Any, port: int) -> tuple[uvicorn.Server, threading.Thread]:
    """Run ``app`` on 127.0.0.1:``port`` in a thread; returns once it accepts connections."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT_S
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise AssertionError("the web server did not start")
        time.sleep(0.02)
    return server, thread


def stop(server: uvicorn.Server, thread: threading.Thread) -> None:
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Config and data folders of this module's servers (module-wide, unlike the autouse ones)."""
    folder = tmp_path_factory.mktemp("web-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CLAWLOOP_CONFIG", str(folder / "config.toml"))
        patch.setenv("CLAWLOOP_DATA_DIR", str(folder / "data"))
        yield folder


@pytest.fixture(scope="module")
def workspace() -> Iterator[Path]:
    """Straight under the temp folder, reachable by the sandbox's uid (see the ``ws`` fixture)."""
    folder = Path(tempfile.mkdtemp(prefix="clawloop-web-ws-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def make_server(
    workspace: Path,
    token: str | None = None,
    bound: str = "127.0.0.1",
    config: dict[str, Any] | None = None,
) -> tuple[WebServer, Any]:
    """The app as `agent web --host BOUND` makes it, always listening on 127.0.0.1 here;
    ``config`` sets more of the settings (dotted keys, as the command's options do)."""
    settings = load_settings({"workspace": workspace, "backend": "fake", **(config or {})})
    port = free_port()
    app = web_app(settings, bound, port, token, fake_backend())
    server, thread = serve(app, port)
    web = WebServer(f"http://127.0.0.1:{port}", "127.0.0.1", port, settings, workspace)
    return web, lambda: stop(server, thread)


@pytest.fixture(scope="module")
def web(home: Path, workspace: Path) -> Iterator[WebServer]:
    server, close = make_server(workspace)
    try:
        yield server
    finally:
        close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless Chromium; skipped only where Chromium or its driver is not installed."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if binary is None or driver is None:
        pytest.skip(
            "chromium or chromedriver not installed (apt-get install chromium chromium-driver)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = binary
    profile = tmp_path_factory.mktemp("chromium-profile")
    for arg in (
        "--headless=new",
        "--no-sandbox",  # tests run as root in CI, where Chromium's own sandbox refuses to start
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--window-size=1100,900",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    chrome = webdriver.Chrome(service=Service(driver), options=options)
    chrome.set_page_load_timeout(WAIT_S)
    try:
        yield chrome
    finally:
        chrome.quit()


def screenshot(browser: Any, name: str) -> None:
    """Save the page as ``name`` in the folder ``CLAWLOOP_WEB_SCREENSHOTS`` names, when set:
    the pictures in docs/web.md are made this way, and only on purpose."""
    folder = os.environ.get(SCREENSHOTS)
    if not folder:
        return
    height = browser.execute_script("return document.documentElement.scrollHeight")
    # The window's size counts its frame, so it is taller than the page it must show whole.
    browser.set_window_size(1100, min(max(int(height) + 320, 600), 2600))
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(folder) / name))
    finally:
        browser.set_window_size(1100, 900)
