"""The chat page in a real browser: a streamed answer, approve, deny, Stop, a trace's timeline."""

from __future__ import annotations

import time
from typing import Any

from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from tests.connectors.harness import processes_with
from tests.connectors.loopthread import wait_for
from tests.web_ui.conftest import WAIT_S, WebServer, screenshot


def open_chat(browser: Any, web: WebServer) -> str:
    """A new tab's chat; returns its session name."""
    browser.get(web.url + "/")
    WebDriverWait(browser, WAIT_S).until(ec.element_to_be_clickable((By.ID, "send-button")))
    return str(browser.find_element(By.ID, "session").text)


def send(browser: Any, text: str) -> None:
    browser.find_element(By.ID, "message").send_keys(text)
    browser.find_element(By.ID, "send-button").click()


def shown(browser: Any, css: str, text: str = "") -> WebElement:
    """The first element matching ``css`` once it holds ``text``."""
    locator = (By.CSS_SELECTOR, css)
    try:
        WebDriverWait(browser, WAIT_S).until(ec.text_to_be_present_in_element(locator, text))
    except TimeoutException:
        page = browser.find_element(By.TAG_NAME, "main").text
        raise AssertionError(f"no {css!r} with {text!r} on the page; it shows:\n{page}") from None
    return browser.find_element(*locator)


def turn_over(browser: Any) -> None:
    WebDriverWait(browser, WAIT_S).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "#transcript .turn-done"))
    )


def click_answer(browser: Any, choice: str) -> WebElement:
    ask = shown(browser, ".approval .title", "shell")
    button = browser.find_element(By.CSS_SELECTOR, f".approval button.{choice}")
    WebDriverWait(browser, WAIT_S).until(ec.element_to_be_clickable(button)).click()
    return ask


def test_a_message_gets_a_streamed_answer_kept_in_the_session(browser: Any, web: WebServer) -> None:
    session = open_chat(browser, web)
    send(browser, "hello <b>there</b>")
    answer = shown(browser, ".msg.assistant.final", "echo: hello")
    assert answer.text == "echo: hello <b>there</b>"  # shown as text, never as markup
    assert not browser.find_elements(By.CSS_SELECTOR, "#transcript b")
    turn_over(browser)
    saved = web.settings.sessions_dir / f"{session}.jsonl"
    assert "echo: hello <b>there</b>" in saved.read_text(encoding="utf-8")
    # A reload keeps the tab's session and shows it so far.
    browser.refresh()
    shown(browser, "#transcript .msg.assistant", "echo: hello")
    assert browser.find_element(By.ID, "session").text == session


def test_approving_a_command_runs_it_and_shows_its_result(browser: Any, web: WebServer) -> None:
    open_chat(browser, web)
    send(browser, "run: echo approved-$((6*7))")
    shown(browser, ".tool-call .args", "echo approved-$((6*7))")
    shown(browser, ".approval .args", "echo approved-$((6*7))")  # the exact command asked
    click_answer(browser, "once")
    shown(browser, ".approval .outcome", "once (a person via the web page)")
    shown(browser, ".tool-result.ok .output", "approved-42")
    shown(browser, ".msg.assistant.final", "done: ")
    assert "approved-42" in browser.find_element(By.CSS_SELECTOR, ".msg.assistant.final").text
    turn_over(browser)
    screenshot(browser, "chat.png")


def test_denying_a_command_never_runs_it(browser: Any, web: WebServer) -> None:
    open_chat(browser, web)
    send(browser, "run: echo never > denied.txt")
    click_answer(browser, "deny")
    shown(browser, ".approval .outcome", "deny")
    result = shown(browser, ".tool-result.failed .head", "error")
    assert "deny" in result.text
    shown(browser, ".msg.assistant.final", "done: ")
    turn_over(browser)
    assert not (web.workspace / "denied.txt").exists()


def test_stop_ends_a_running_command_quickly(browser: Any, web: WebServer) -> None:
    open_chat(browser, web)
    send(browser, "run: sleep 30 && echo web-ui-stopped")
    click_answer(browser, "once")
    wait_for(lambda: processes_with("web-ui-stopped"), WAIT_S, "the command to start")
    stop = browser.find_element(By.ID, "stop-button")
    began = time.monotonic()
    stop.click()
    shown(browser, "#transcript .stopped", "stopped")
    took = time.monotonic() - began
    turn_over(browser)
    assert took < 10, f"stopping took {took:.1f} s"
    wait_for(lambda: not processes_with("web-ui-stopped"), WAIT_S, "the command to end")
    failed = browser.find_element(By.CSS_SELECTOR, ".tool-result.failed .output")
    assert failed.text == "error: shell was stopped by the user"
    assert browser.find_element(By.ID, "send-button").is_enabled()


def test_a_trace_opens_as_a_timeline(browser: Any, web: WebServer) -> None:
    open_chat(browser, web)
    send(browser, "run: echo traced-$((6*7))")
    click_answer(browser, "once")
    shown(browser, ".msg.assistant.final", "traced-42")
    turn_over(browser)
    browser.get(web.url + "/traces")
    browser.get(web.url + "/traces?q=nothing-like-this")
    shown(browser, "#no-traces", "No run matches")
    browser.get(web.url + "/traces?q=TRACED-")
    first = shown(browser, "#traces tbody tr", "run: echo traced-")
    first.find_element(By.CSS_SELECTOR, "a.run").click()
    timeline = shown(browser, "#timeline", "tool call shell")
    text = timeline.text
    assert "step 1" in text and "prompt tokens" in text and "generated" in text
    assert "tools offered: " in text and "shell" in text.split("tools offered: ")[1]
    assert "echo traced-$((6*7))" in text
    assert "asked: once by a person via the web page" in text
    assert "decision: once by a person via the web page" in text
    assert "traced-42" in text
    assert "traced-42" in browser.find_element(By.ID, "final").text
    screenshot(browser, "trace.png")


def test_always_saves_the_rule_and_later_tabs_are_not_asked(browser: Any, web: WebServer) -> None:
    open_chat(browser, web)
    send(browser, "run: echo always-$((6*7))")
    click_answer(browser, "always")
    shown(browser, ".approval .outcome", "always")
    shown(browser, ".tool-result.ok .output", "always-42")
    turn_over(browser)
    assert "echo always-$((6*7))" in web.settings.config_path.read_text(encoding="utf-8")
    open_chat(browser, web)  # another tab, another session: the rule holds there too
    send(browser, "run: echo always-$((6*7))")
    shown(browser, ".tool-result.ok .output", "always-42")
    turn_over(browser)
    assert not browser.find_elements(By.CSS_SELECTOR, ".approval")
