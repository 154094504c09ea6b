"""The operations page in a real browser: pairing, skills, jobs, usage and the sandbox report,
each as its command shows it, from the real files of the data folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from selenium.webdriver.common.by import By
from typer.testing import CliRunner

from cli.config import load_settings
from cli.gateway_cmd import access_list
from cli.main import app
from cli.web_ops import ops_sections
from tests.web_ui.conftest import WebServer
from tests.web_ui.test_web_page import shown
from tests.web_ui.test_web_security import page_tokens


def test_the_ops_page_shows_pairings_skills_jobs_usage_and_the_sandbox(
    browser: Any, web: WebServer
) -> None:
    access = access_list(web.settings)
    access.approve(access.code_for("telegram:4242", "Ada <script>"))
    waiting = access.code_for("discord:77", "Bob")
    server_home = {"CLAWLOOP_DATA_DIR": str(web.settings.data_dir)}  # not this test's own
    command = ["cron", "add", "every 1h", "check the news", "--name", "news"]
    added = CliRunner().invoke(app, command, env=server_home)
    assert added.exit_code == 0, added.output
    with httpx.Client(base_url=web.url, timeout=20) as client:  # one turn, for the usage table
        sent = client.post("/chat/send", json={"message": "hi"}, headers=page_tokens(client))
        assert sent.status_code == 200 and '"type": "done"' in sent.text
    browser.get(web.url + "/ops")
    pairing = shown(browser, "#pairing", "telegram:4242")
    rows = [r.text for r in pairing.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert any(r.startswith("telegram:4242 Ada <script>") and r.endswith("paired") for r in rows)
    # A waiting code's row ends with its buttons (see test_web_ops_changes.py).
    waits = f"waiting approve {waiting} deny {waiting}"
    assert any(r.startswith(f"{waiting} Bob (discord:77)") and r.endswith(waits) for r in rows)
    assert not browser.find_elements(By.CSS_SELECTOR, "#pairing script")  # text, never markup
    skills = shown(browser, "#skills", "shell")
    assert "Run bash commands in the sandbox." in skills.text
    jobs = shown(browser, "#jobs", "news")
    assert "every 1h" in jobs.text and "never" in jobs.text
    usage = shown(browser, "#usage", "total")
    assert usage.find_elements(By.CSS_SELECTOR, "tbody tr")[0].text.split()[1] == "1"  # runs
    doctor = shown(browser, "#doctor", "bubblewrap")
    assert doctor.find_elements(By.CSS_SELECTOR, "tbody tr")[0].text.startswith(("ok", "NO"))


def test_a_part_that_cannot_be_read_says_why_and_the_rest_still_show(tmp_path: Path) -> None:
    settings = load_settings({"data_dir": tmp_path / "data", "backend": "fake"})
    jobs = settings.data_dir / "cron" / "jobs.sqlite"
    jobs.parent.mkdir(parents=True)
    jobs.write_bytes(b"not a database, " * 512)
    sections = {s.id: s for s in ops_sections(settings)}
    assert sections["jobs"].problem is not None and "database" in sections["jobs"].problem
    assert sections["skills"].problem is None and sections["skills"].rows
    assert sections["doctor"].problem is None and sections["doctor"].rows
