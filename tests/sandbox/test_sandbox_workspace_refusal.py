"""A workspace that is ``/``, the home folder, or holds clawloop's config is refused.

In such a workspace a command could rewrite what runs outside the sandbox later (the home's
``.gitconfig`` and ``.bashrc``) or the config of the next run (moving ``.config`` aside and
writing a new ``config.toml`` switched a later call to full access). The judge is that no
context, and so no sandboxed command, can be made over such a folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.errors import UserError
from skills.context import Places, SkillContext


def test_the_home_folder_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with pytest.raises(UserError, match=r"home folder.*--workspace"):
        SkillContext.create(home, environ={"HOME": str(home)})


def test_the_root_folder_is_refused() -> None:
    with pytest.raises(UserError, match="root folder /"):
        SkillContext.create(Path("/"), environ={"HOME": "/nonexistent"})


@pytest.mark.parametrize("where", ["config.toml", ".config/clawloop/config.toml"])
def test_a_workspace_holding_the_config_is_refused(tmp_path: Path, where: str) -> None:
    ws = tmp_path / "ws"
    (ws / where).parent.mkdir(parents=True, exist_ok=True)
    (ws / where).write_text("[sandbox]\n")
    with pytest.raises(UserError, match="contains clawloop's config"):
        SkillContext.create(
            ws, environ={"HOME": "/nonexistent"}, places=Places(config_path=ws / where)
        )


def test_a_link_to_the_home_folder_is_the_home_folder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "link").symlink_to(home)
    with pytest.raises(UserError, match="home folder"):
        SkillContext.create(tmp_path / "link", environ={"HOME": str(home)})


def test_control_a_project_folder_is_accepted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    context = SkillContext.create(
        home / "project",
        environ={"HOME": str(home)},
        places=Places(config_path=home / ".config" / "c.toml"),
    )
    assert context.workspace == (home / "project").resolve()
