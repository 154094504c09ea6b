"""Grading a trace from its timeline, and the saved sessions with their search, in a real
browser against the app `agent web` serves."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from agent.trace import read_trace, read_traces, trace_path
from tests.web_ui.conftest import WAIT_S, WebServer
from tests.web_ui.test_web_page import open_chat, send, shown, turn_over

ROOT = Path(__file__).resolve().parents[2]


def page_tokens(client: httpx.Client, path: str) -> dict[str, str]:
    html = client.get(path).text
    session = re.search(r'data-session="([^"]+)"', html)
    csrf = re.search(r'data-csrf="([^"]+)"', html)
    assert session and csrf
    return {"x-clawloop-session": session[1], "x-csrf-token": csrf[1]}


def a_turn(web: WebServer, message: str) -> str:
    """One real turn through the chat's POST; returns the run id of its trace."""
    with httpx.Client(base_url=web.url, timeout=WAIT_S) as client:
        reply = client.post(
            "/chat/send", json={"message": message}, headers=page_tokens(client, "/")
        )
        assert reply.status_code == 200 and '"done"' in reply.text
    return next(t.run_id for t in read_traces(web.settings.traces_dir) if message in str(t.start))


def traces_list(web: WebServer) -> str:
    """What `agent traces list` prints, run as a command against the same folders."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "250",
        # the server's folders: each test's own home is a fresh one (tests/conftest.py)
        "CLAWLOOP_CONFIG": str(web.settings.data_dir.parent / "config.toml"),
        "CLAWLOOP_DATA_DIR": str(web.settings.data_dir),
    }
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "traces", "list"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=web.workspace,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def click_grade(browser: Any, verdict: str) -> None:
    """Click a grade button and wait for the reloaded page that says it was graded."""
    WebDriverWait(browser, WAIT_S).until(
        ec.element_to_be_clickable((By.CSS_SELECTOR, f"button.grade.{verdict}"))
    ).click()
    # Read by a script, not through an element: the reload replaces the document under it.
    status = "const e = document.getElementById('grade-status'); return e ? e.textContent : '';"
    WebDriverWait(browser, WAIT_S, ignored_exceptions=(WebDriverException,)).until(
        lambda b: str(b.execute_script(status)).endswith(f" {verdict}")
    )


def test_a_trace_graded_on_its_page_is_graded_as_the_command_grades(
    browser: Any, web: WebServer
) -> None:
    open_chat(browser, web)
    send(browser, "please grade this run")
    shown(browser, ".msg.assistant.final", "echo: please grade this run")
    turn_over(browser)
    browser.get(web.url + "/traces")
    row = shown(browser, "#traces tbody tr", "please grade this run")
    row.find_element(By.CSS_SELECTOR, "a.run").click()
    assert shown(browser, "#grade").text == "not graded"
    run_id = browser.find_element(By.ID, "trace").get_attribute("data-run")
    assert f"agent traces fix {run_id}" in browser.find_element(By.ID, "fix-hint").text
    browser.find_element(By.ID, "grade-note").send_keys("did <it> well")
    click_grade(browser, "good")
    shown(browser, "#grade", "good")
    shown(browser, "#grade-status", f"graded {run_id} good")

    trace = read_trace(trace_path(web.settings.traces_dir, run_id))
    last = trace.of_type("grade")[-1]
    assert trace.grade == "good" and last["by"] == "user" and last["note"] == "did <it> well"
    printed = traces_list(web)
    listed = [line for line in printed.splitlines() if run_id in line]
    assert len(listed) == 1 and "good" in listed[0], printed

    browser.get(web.url + "/traces")
    row = shown(browser, "#traces tbody tr", "please grade this run")
    assert row.find_element(By.CSS_SELECTOR, "td.grade").text == "good"
    # A later grade replaces it, as a later `agent traces grade` does.
    row.find_element(By.CSS_SELECTOR, "a.run").click()
    shown(browser, "#grade", "good")
    click_grade(browser, "bad")
    shown(browser, "#grade", "bad")
    assert read_trace(trace_path(web.settings.traces_dir, run_id)).grade == "bad"


def test_a_grade_needs_the_pages_csrf_token_and_its_own_origin(web: WebServer) -> None:
    run_id = a_turn(web, "a run no other site may grade")
    url = f"/traces/{run_id}/grade"
    with httpx.Client(base_url=web.url, timeout=WAIT_S) as client:
        headers = page_tokens(client, f"/traces/{run_id}")
        body = {"grade": "bad"}
        no_token = {"x-clawloop-session": headers["x-clawloop-session"]}
        assert client.post(url, json=body, headers=no_token).status_code == 403
        foreign = {**headers, "origin": "http://attacker.example"}
        refused = client.post(url, json=body, headers=foreign)
        assert refused.status_code == 403 and "another origin" in refused.text
        assert read_trace(trace_path(web.settings.traces_dir, run_id)).grade is None
        # The page's own request goes through; a grade other than good or bad does not.
        assert client.post(url, json={"grade": "meh"}, headers=headers).status_code == 400
        own = client.post(url, json=body, headers={**headers, "origin": web.url})
        assert own.status_code == 200
    assert read_trace(trace_path(web.settings.traces_dir, run_id)).grade == "bad"


def test_the_sessions_page_lists_and_finds_a_chat_to_continue(browser: Any, web: WebServer) -> None:
    session = open_chat(browser, web)
    send(browser, "remember the zanzibarquokka please")
    shown(browser, ".msg.assistant.final", "echo: remember the zanzibarquokka")
    turn_over(browser)

    browser.get(web.url + "/")
    browser.find_element(By.LINK_TEXT, "Sessions").click()
    row = shown(browser, "#sessions tbody tr", session)
    assert "remember the zanzibarquokka please" in row.find_element(By.CSS_SELECTOR, ".first").text

    search = browser.find_element(By.ID, "q")
    search.send_keys("zanzibarquokka")
    browser.find_element(By.ID, "search-button").click()
    hit = shown(browser, "#hits tbody tr", session)
    assert "zanzibarquokka" in hit.find_element(By.CSS_SELECTOR, ".excerpt").text
    link = hit.find_element(By.CSS_SELECTOR, "a.session")
    assert link.get_attribute("href") == f"{web.url}/?session={quote(session)}"
    link.click()
    assert shown(browser, "#session", session).text == session
    shown(browser, "#transcript .msg.assistant", "echo: remember the zanzibarquokka")

    browser.get(web.url + "/sessions?q=" + quote("absentwordxyzzy"))
    assert "absentwordxyzzy" in shown(browser, "#no-hits", "No session mentions").text
    assert not browser.find_elements(By.CSS_SELECTOR, "#hits tbody tr")
