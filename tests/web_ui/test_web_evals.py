"""The eval pages in a real browser: the runs `agent eval` kept, a suite's plot, one run's
report, and the tasks that flipped between two runs.

The reports are made by the eval runner itself (real loop, skills and sandbox) with scripted
models, and kept by the function `agent eval` keeps them with, so their figures are known.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from agent.messages import AssistantMessage, ChatRequest
from backends.fake import FakeBackend
from cli.config import load_settings
from cli.evals.report import to_json
from cli.evals.runner import Variant, run_suite
from cli.evals.stats import wilson
from cli.evals.store import reports_dir, save_report
from cli.evals.suite import load_suite
from connectors.web.evals import flips, read_runs
from tests.web_ui.conftest import WebServer, screenshot
from tests.web_ui.test_web_page import shown

SUITE = """
name: web-tiny
tasks:
  - id: capital
    prompt: What is the capital of France?
    check: {answer_regex: 'Paris'}
  - id: sum
    prompt: What is 2+2?
    check: {answer_regex: '\\b4\\b'}
  - id: hello
    prompt: Say anything.
    check: {answer_regex: '.'}
"""


def answering(text: str) -> Callable[[ChatRequest], AssistantMessage]:
    return lambda request: AssistantMessage(content=text)


@pytest.fixture(scope="module")
def runs(web: WebServer, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two kept runs of one suite: the first knows capitals, the second sums."""
    path = tmp_path_factory.mktemp("suite") / "web-tiny.yaml"
    path.write_text(SUITE, encoding="utf-8")
    suite = load_suite(path)
    settings = load_settings({"backend": "fake", "workspace": web.workspace})
    ids = []
    for day, (name, text) in enumerate([("base", "Paris"), ("tuned", "4")], start=1):
        variant = Variant(name, settings, FakeBackend([answering(text)] * 10))  # type: ignore[list-item]
        run_suite(suite, [variant])
        when = dt.datetime(2026, 5, day, 12, 0, tzinfo=dt.UTC)
        kept = save_report(reports_dir(web.settings.data_dir), to_json(suite.name, [variant]), when)
        ids.append(kept.stem)
    return ids


def test_the_evals_page_shows_each_run_and_the_suites_plot(
    browser: Any, web: WebServer, runs: list[str]
) -> None:
    browser.get(web.url + "/evals")
    table = shown(browser, f'table.eval-run[data-run="{runs[0]}"]', "base")
    low, high = wilson(2, 3)
    assert "2/3" in table.text and "66.7%" in table.text
    assert f"{low * 100:.1f}–{high * 100:.1f}%" in table.text
    assert "fake" in table.text
    plot = browser.find_element(By.CSS_SELECTOR, 'svg[data-suite="web-tiny"]')
    bars = plot.find_elements(By.CSS_SELECTOR, "g.point rect.bar")
    assert len(bars) == 2  # one per run
    heights = [float(b.get_attribute("height")) for b in bars]
    assert heights[0] == pytest.approx(heights[1])  # 2/3 both times
    whiskers = plot.find_elements(By.CSS_SELECTOR, "g.point line.whisker")
    assert len(whiskers) == 6
    # One run's report: its table, its tasks, and the suite's plot.
    browser.find_element(By.CSS_SELECTOR, f'a.run[href="/evals/{runs[1]}"]').click()
    tasks = shown(browser, "#eval-tasks", "capital")
    rows = {r.text.split()[1]: r.text for r in tasks.find_elements(By.CSS_SELECTOR, "tbody tr")}
    assert "failed" in rows["capital"] and "does not match" in rows["capital"]
    assert "passed" in rows["sum"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg g.point")) == 2
    screenshot(browser, "evals.png")


def test_compare_lists_the_tasks_that_flipped(
    browser: Any, web: WebServer, runs: list[str]
) -> None:
    browser.get(web.url + "/evals")
    Select(browser.find_element(By.ID, "compare-a")).select_by_value(runs[0])
    Select(browser.find_element(By.ID, "compare-b")).select_by_value(runs[1])
    browser.find_element(By.CSS_SELECTOR, "#compare button").send_keys(Keys.ENTER)  # keyboard
    flips = shown(browser, "#flips", "capital")
    rows = [r.text for r in flips.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert rows == ["capital 1/1 0/1 now fails", "sum 0/1 1/1 now passes"]  # hello held
    # An unknown run is a page that says so.
    browser.get(web.url + f"/evals/compare?a={runs[0]}&b=nope")
    assert "no eval run 'nope'" in shown(browser, "#error", "nope").text


def test_a_report_that_does_not_parse_is_named_not_fatal(
    browser: Any, web: WebServer, runs: list[str]
) -> None:
    broken = reports_dir(web.settings.data_dir) / "20260601-000000-broken.json"
    broken.write_text("{not json", encoding="utf-8")
    try:
        browser.get(web.url + "/evals")
        shown(browser, "main", "not readable: 20260601-000000-broken.json")
        assert browser.find_elements(By.CSS_SELECTOR, 'svg[data-suite="web-tiny"] g.point')
    finally:
        Path(broken).unlink()


def test_only_tasks_that_passed_every_attempt_in_one_run_and_none_in_the_other_flip(
    tmp_path: Path,
) -> None:
    def report(outcomes: dict[str, list[bool]]) -> dict[str, Any]:
        tasks = [{"task": t, "passed": p} for t, ps in outcomes.items() for p in ps]
        passed = sum(t["passed"] for t in tasks)
        low, high = wilson(passed, len(tasks))
        variant = {"variant": "v", "passed": passed, "total": len(tasks), "rate": 0.5}
        return {"suite": "s", "variants": [{**variant, "low": low, "high": high, "tasks": tasks}]}

    first = {"steady": [True, True], "mixed": [True, False], "gone": [True, True]}
    second = {
        "steady": [True, True],
        "mixed": [False, False],
        "gone": [False, False],
        "new": [True],
    }
    day = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)
    save_report(tmp_path, report(first), day)
    save_report(tmp_path, report(second), day + dt.timedelta(days=1))
    a, b = read_runs(tmp_path).runs
    assert [(f.task, f.a, f.b) for f in flips(a, b)] == [("gone", (2, 2), (0, 2))]
    assert flips(b, a)[0].task == "gone"
