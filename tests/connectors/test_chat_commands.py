"""Chat commands (/new, /status, /stop) and `agent pairing`, against the local Bot API server."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_telegram import TOKEN, FakeTelegram
from harness import make_gateway
from loopthread import LoopThread, wait_for
from typer.testing import CliRunner

from cli.main import app
from connectors.access import AccessList
from connectors.state import GatewayState
from connectors.telegram_bot import TelegramConnector

OWNER = 111


def texts(fake: FakeTelegram) -> list[str]:
    return [s.text for s in fake.replies(OWNER)]


def test_new_status_and_stop(lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path) -> None:
    state = GatewayState(tmp_path / "state.json")
    connector = TelegramConnector(TOKEN, state, fake.base_url, poll_timeout=1)
    setup = make_gateway(
        [connector], tmp_path, ws, {"telegram": [str(OWNER)]}, state, rate_burst=20
    )
    lt.run(setup.gateway.start())
    fake.say(OWNER, OWNER, "first")
    wait_for(lambda: "echo: first" in texts(fake), what="first answer")
    fake.say(OWNER, OWNER, "/status")
    status = wait_for(lambda: next((t for t in texts(fake) if t.startswith("model:")), None))
    assert "session: telegram-111 (" in status and "running: nothing" in status
    fake.say(OWNER, OWNER, "run: sleep 30")  # asks first: an approval keeps the turn running
    wait_for(lambda: any("Approval needed" in t for t in texts(fake)), what="the ask")
    fake.say(OWNER, OWNER, "/status")
    wait_for(lambda: any("running: 'run: sleep 30'" in t for t in texts(fake)), what="status")
    fake.say(OWNER, OWNER, "/stop")
    wait_for(lambda: "⏹ stopped." in texts(fake) or any("stopped" in t for t in texts(fake)))
    fake.say(OWNER, OWNER, "/new")
    wait_for(lambda: any(t.startswith("Started a new session") for t in texts(fake)))
    fake.say(OWNER, OWNER, "second")
    wait_for(lambda: "echo: second" in texts(fake), what="answer in the new session")
    lt.run(setup.gateway.stop())
    # The new session holds only the new conversation.
    old = (tmp_path / "sessions" / "telegram-111.jsonl").read_text()
    new = (tmp_path / "sessions" / "telegram-111-1.jsonl").read_text()
    assert "first" in old and "second" not in old and "second" in new and "first" not in new


def test_agent_pairing_list_approve_revoke(isolated_home: Path) -> None:
    access = AccessList(isolated_home / "data" / "gateway" / "pairing.json", {}, {})
    code = access.code_for("discord:42", "Ada")
    runner = CliRunner()
    listed = runner.invoke(app, ["pairing", "list"])
    assert listed.exit_code == 0 and code in listed.output and "discord:42" in listed.output
    wrong = runner.invoke(app, ["pairing", "approve", "NOPE22"])
    assert wrong.exit_code != 0
    assert access.role("discord:42") == "stranger"
    ok = runner.invoke(app, ["pairing", "approve", code.lower()])
    assert ok.exit_code == 0 and "paired discord:42" in ok.output
    assert access.role("discord:42") == "paired"
    gone = runner.invoke(app, ["pairing", "revoke", "42"])
    assert gone.exit_code == 0 and "revoked discord:42" in gone.output
    assert access.role("discord:42") == "stranger"


def test_config_show_hides_the_bot_tokens(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (isolated_home / "config.toml").write_text(
        '[connectors.discord]\nenabled = true\ntoken = "discord-secret-token-123"\n'
    )
    monkeypatch.setenv("CLAWLOOP_TELEGRAM_TOKEN", "42:telegram-secret-token")
    shown = CliRunner().invoke(app, ["config", "show"])
    assert shown.exit_code == 0 and '"enabled": true' in shown.output
    assert "secret-token" not in shown.output and "[redacted]" in shown.output
