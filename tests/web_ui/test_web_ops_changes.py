"""Changes made from /ops in a real browser: approve or deny a pairing code, approve a new
skill, pause and resume a job. Each is checked with the command's own listing afterwards; a
POST without the page's CSRF token, or from another origin, changes nothing."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait
from typer.testing import CliRunner

from cli.gateway_cmd import access_list
from cli.main import app
from tests.web_ui.conftest import WAIT_S, WebServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def command(home: Path, web: WebServer, *args: str) -> str:
    """What `agent ARGS` prints against the server's config and data folder."""
    env = {
        "CLAWLOOP_CONFIG": str(home / "config.toml"),
        "CLAWLOOP_DATA_DIR": str(web.settings.data_dir),
        "COLUMNS": "200",
    }
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result.output


def click(browser: Any, action: str, target: str) -> str:
    """Click the button doing ``action`` to ``target``; returns what the page says was done."""
    css = f'button.act[data-action="{action}"][data-target="{target}"]'
    button = WebDriverWait(browser, WAIT_S).until(
        ec.element_to_be_clickable((By.CSS_SELECTOR, css))
    )
    button.click()

    # The page reloads to show the new state, with what was done above the tables (kept
    # across the reload); until then it says "working…". A read during the reload is retried.
    def said(driver: Any) -> str | bool:
        text = str(driver.find_element(By.ID, "ops-status").text)
        return text if text not in ("", "working…") else False

    wait = WebDriverWait(browser, WAIT_S, ignored_exceptions=(WebDriverException,))
    return str(wait.until(said))


def job_row(listing: str, name: str) -> str:
    """The line of ``listing`` (a table or `agent cron list`'s lines) naming ``name``."""
    return next(line for line in listing.splitlines() if f" {name} " in f" {line} ")


def test_pairing_codes_are_approved_and_denied_from_the_page(
    browser: Any, web: WebServer, home: Path
) -> None:
    access = access_list(web.settings)
    yes = access.code_for("telegram:5151", "Ada")
    no = access.code_for("discord:6262", "Mallory")
    browser.get(web.url + "/ops")
    assert click(browser, "pairing-approve", yes) == "paired telegram:5151"
    assert click(browser, "pairing-deny", no) == "denied discord:6262"
    listing = command(home, web, "pairing", "list")
    assert "telegram:5151" in listing and "paired" in listing
    assert no not in listing and "discord:6262" not in listing
    assert not browser.find_elements(By.CSS_SELECTOR, f'button[data-target="{yes}"]')


def test_a_new_skill_is_approved_from_the_page(browser: Any, web: WebServer, home: Path) -> None:
    folder = web.settings.skills_dir or web.settings.data_dir / "skills"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(EXAMPLES / "instruction-skill" / "word-stats", folder / "word-stats")
    assert "new: disabled" in job_row(command(home, web, "skills", "list"), "word-stats")
    browser.get(web.url + "/ops")
    assert click(browser, "skill-approve", "word-stats") == "approved word-stats"
    row = job_row(command(home, web, "skills", "list"), "word-stats")
    assert "approved" in row and "disabled" not in row


def test_a_job_is_paused_and_resumed_from_the_page(
    browser: Any, web: WebServer, home: Path
) -> None:
    command(home, web, "cron", "add", "every 1h", "water the plants", "--name", "plants")
    job_id = job_row(command(home, web, "cron", "list"), "plants").split()[0]
    browser.get(web.url + "/ops")
    assert click(browser, "job-pause", job_id) == f"paused {job_id} (plants)"
    assert "paused" in job_row(command(home, web, "cron", "list"), "plants")
    assert click(browser, "job-resume", job_id).startswith(f"resumed {job_id} (plants)")
    assert "next" in job_row(command(home, web, "cron", "list"), "plants")


@pytest.mark.parametrize("problem", ["no CSRF token", "another origin"])
def test_a_change_without_the_pages_token_or_from_elsewhere_is_refused(
    web: WebServer, problem: str
) -> None:
    access = access_list(web.settings)
    code = access.code_for("telegram:7373", "Eve")
    with httpx.Client(base_url=web.url, timeout=20) as client:
        html = client.get("/ops").text
        assert 'data-session="ops-page"' in html
        csrf = html.split('data-csrf="', 1)[1].split('"', 1)[0]
        good = {"x-clawloop-session": "ops-page", "x-csrf-token": csrf}
        headers = (
            {"x-clawloop-session": "ops-page"}
            if problem == "no CSRF token"
            else {**good, "origin": "http://attacker.example"}
        )
        body = {"action": "pairing-approve", "target": code}
        r = client.post("/ops/act", json=body, headers=headers)
        assert r.status_code == 403
        assert code in [p.code for p in access.pending()]  # still waiting
        # The same request with the page's token, from the page itself, goes through.
        r = client.post("/ops/act", json=body, headers=good)
        assert r.status_code == 200 and r.json() == {"done": "paired telegram:7373"}
        r = client.post(
            "/ops/act", json={"action": "pairing-approve", "target": "NOPE"}, headers=good
        )
        assert r.status_code == 400 and "no pending pairing" in r.json()["error"]
