"""Files sent from the page in a real browser: saved in the workspace's inbox/ and named in
the model's request, or refused whole when one is over the limit."""

from __future__ import annotations

import base64
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By

from tests.web_ui.conftest import WebServer, make_server
from tests.web_ui.test_web_page import open_chat, send, shown, turn_over
from tests.web_ui.test_web_security import page_tokens

LIMIT_MB = 0.001  # 1048 bytes: a small file fits, a 2 kB one does not


@pytest.fixture(scope="module")
def small_limit(home: Path) -> Iterator[WebServer]:
    """A page whose files may be 1048 bytes at most, on a workspace of its own."""
    folder = Path(tempfile.mkdtemp(prefix="clawloop-web-files-"))
    folder.chmod(0o755)
    server, close = make_server(folder, config={"gateway.max_file_mb": LIMIT_MB})
    try:
        yield server
    finally:
        close()
        shutil.rmtree(folder, ignore_errors=True)


def inbox(web: WebServer) -> list[str]:
    box = web.workspace / "inbox"
    return sorted(p.name for p in box.iterdir()) if box.exists() else []


def test_a_chosen_file_is_saved_in_the_inbox_and_named_to_the_model(
    browser: Any, small_limit: WebServer, tmp_path: Path
) -> None:
    chosen = tmp_path / "my notes (v2).txt"
    chosen.write_text("the meeting is at noon\n")
    session = open_chat(browser, small_limit)
    browser.find_element(By.ID, "files").send_keys(str(chosen))
    shown(browser, "#files-chosen", "my notes (v2).txt")
    send(browser, "read this")
    # The fake model echoes its request: the file's place in the workspace is in it.
    answer = shown(browser, ".msg.assistant.final", "inbox/my_notes_v2_.txt")
    assert "echo: read this" in answer.text
    turn_over(browser)
    assert inbox(small_limit) == ["my_notes_v2_.txt"]
    saved = small_limit.workspace / "inbox" / "my_notes_v2_.txt"
    assert saved.read_text() == "the meeting is at noon\n"
    request = (small_limit.settings.sessions_dir / f"{session}.jsonl").read_text()
    assert "saved in the workspace at inbox/my_notes_v2_.txt" in request
    assert browser.find_element(By.ID, "files-chosen").text == ""  # sent, so no longer pending


def test_a_file_over_the_limit_is_refused_with_a_clear_message_and_nothing_saved(
    browser: Any, small_limit: WebServer, tmp_path: Path
) -> None:
    before = inbox(small_limit)
    small, big = tmp_path / "small.txt", tmp_path / "big.bin"
    small.write_text("fits")
    big.write_bytes(b"x" * 2048)
    open_chat(browser, small_limit)
    browser.find_element(By.ID, "files").send_keys(f"{small}\n{big}")
    send(browser, "both")
    error = shown(browser, "#transcript .error", "big.bin is too big")
    assert "the limit is 1048" in error.text and "nothing was saved" in error.text
    turn_over(browser)
    assert inbox(small_limit) == before  # not even the small one
    assert not browser.find_elements(By.CSS_SELECTOR, ".msg.assistant.final")


def test_files_that_are_not_base64_or_too_many_are_refused(small_limit: WebServer) -> None:
    with httpx.Client(base_url=small_limit.url, timeout=20) as client:
        headers = page_tokens(client)
        bad = {"message": "x", "files": [{"name": "a.txt", "data": "not base64!"}]}
        r = client.post("/chat/send", json=bad, headers=headers)
        assert r.status_code == 413 and "did not arrive whole" in r.json()["error"]
        one = {"name": "a.txt", "data": base64.b64encode(b"a").decode()}
        r = client.post("/chat/send", json={"message": "x", "files": [one] * 21}, headers=headers)
        assert r.status_code == 400
        r = client.post("/chat/send", json={"message": " ", "files": []}, headers=headers)
        assert r.status_code == 400 and r.json()["error"] == "the message is empty"
    assert "a.txt" not in inbox(small_limit)
