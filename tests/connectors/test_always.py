"""An "always" answer in a chat: saved to the config file, kept by the chat's later turns.

Every turn that starts after it (in any chat) begins with the rule, as after a restart; a turn
already running in another chat is not changed by it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from fake_telegram import TOKEN, FakeTelegram, Sent
from harness import make_gateway
from loopthread import LoopThread, wait_for

from cli.config import add_rule
from connectors.state import GatewayState
from connectors.telegram_bot import TelegramConnector

OWNER = 111
GROUP = -100700


def asks(fake: FakeTelegram, chat: int) -> list[Sent]:
    return [s for s in fake.replies(chat) if "Approval needed" in s.text]


def ask_id(sent: Sent) -> str:
    return sent.text.split("/approve ")[1].split(" ")[0]


def dones(fake: FakeTelegram, chat: int) -> list[str]:
    return [s.text for s in fake.replies(chat) if s.text.startswith("done:")]


def test_always_is_saved_and_kept_but_never_changes_a_running_turn(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[sandbox]\nallow = ["shell(ls *)"]\n')
    state = GatewayState(tmp_path / "state.json")
    connector = TelegramConnector(TOKEN, state, fake.base_url, poll_timeout=1)
    setup = make_gateway(
        [connector], tmp_path, ws, {"telegram": [str(OWNER)]}, state,
        save_rule=lambda rule: add_rule("allow", rule, config), rate_burst=50,
    )  # fmt: skip
    lt.run(setup.gateway.start())
    # The group's turn asks first and stays open: a running turn, in another chat.
    fake.say(GROUP, OWNER, "@clawbot run: touch same.txt", group=True)
    [group_ask] = wait_for(lambda: asks(fake, GROUP), what="the group's ask")
    fake.say(OWNER, OWNER, "run: touch same.txt")
    [ask] = wait_for(lambda: asks(fake, OWNER), what="the private chat's ask")
    fake.say(OWNER, OWNER, f"/approve {ask_id(ask)} always")
    wait_for(lambda: dones(fake, OWNER), what="the approved turn")
    assert (ws / "same.txt").exists()
    saved = tomllib.loads(config.read_text())["sandbox"]["allow"]
    assert saved[0] == "shell(ls *)" and len(saved) == 2 and "touch same.txt" in saved[1]
    assert saved[1] in ask.text  # the rule the ask offered is the rule saved
    # The same chat's next turn runs the call without asking.
    (ws / "same.txt").unlink()
    fake.say(OWNER, OWNER, "run: touch same.txt")
    wait_for(lambda: len(dones(fake, OWNER)) == 2, what="the second turn")
    assert len(asks(fake, OWNER)) == 1 and (ws / "same.txt").exists()
    # The group's running turn still waits for its own answer: nothing settled it.
    assert not dones(fake, GROUP)
    assert any(ask_id(group_ask) in a for a in [s.text for s in asks(fake, GROUP)])
    assert ask_id(group_ask) in setup.gateway.asks
    fake.say(GROUP, OWNER, f"/deny@clawbot {ask_id(group_ask)}", group=True)
    wait_for(lambda: dones(fake, GROUP), what="the group's refused turn")
    assert "declined" in dones(fake, GROUP)[0]
    # A turn the group starts now begins with the saved rule, as after a restart.
    (ws / "same.txt").unlink()
    fake.say(GROUP, OWNER, "@clawbot run: touch same.txt", group=True)
    wait_for(lambda: len(dones(fake, GROUP)) == 2, what="the group's new turn")
    assert len(asks(fake, GROUP)) == 1 and (ws / "same.txt").exists()
    # A different command still asks: "always" allowed that call, not everything.
    fake.say(OWNER, OWNER, "run: touch other.txt")
    wait_for(lambda: len(asks(fake, OWNER)) == 2, what="a new ask for another command")
    lt.run(setup.gateway.stop())
    assert not (ws / "other.txt").exists()
