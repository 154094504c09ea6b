"""Skill plugins: a Python package, SKILL.md folders and single files, held to their manifests.

Everything goes through the real registry, lock file and sandbox; the Python package is built
and installed by pip into a folder put on ``sys.path``, so its entry point is found the way an
installed plugin's is.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agent.errors import ToolError, UserError
from agent.loop import AgentLoop
from agent.messages import AssistantMessage, ToolCall
from agent.session import Session
from cli.approvals import AutoApprover
from cli.config import Settings
from cli.skills_cmd import Skills, approve, check, install, list_skills, remove, show_info
from cli.wiring import system_prompt
from sandbox.settings import SandboxSettings
from skills.context import SkillContext
from skills.instructions import load_instruction_skill
from skills.reload import SkillWatcher
from skills.toolbox import LiveToolbox, SkillSet, build_toolbox, guard

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

FILE_SKILL = '''
from agent.plugins import hookimpl
from agent.tools import function_tool
from skills.skill import Permissions, Skill


def start(context):
    def {tool}(argv: list[str]) -> str:
        """Run a program through the skill's runner."""
        return context.runner.run(argv).stdout.strip()

    return [function_tool({tool})]


@hookimpl
def register_skills(register):
    register(Skill("{name}", start, "{description}", permissions=Permissions(commands={cmds})))
'''


def file_skill(name: str, tool: str = "", cmds: str = "['echo']", description: str = "d") -> str:
    return FILE_SKILL.format(
        name=name, tool=tool or f"{name}_run", cmds=cmds, description=description
    )


def settings_for(tmp_path: Path, **changes: Any) -> Settings:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "story.txt").write_text("the cat saw the dog and the dog saw the cat\n")
    (ws / "notes.md").write_text("one two three\nfour\n")
    (ws / "secret.env").write_text("TOKEN=abc\n")
    base = Settings(workspace=ws, data_dir=tmp_path / "data", sandbox=SandboxSettings())
    return base.model_copy(update=changes)


def console() -> Console:
    return Console(record=True, width=200, force_terminal=False)


def run_loop(settings: Settings, turns: list[Any]) -> list[Any]:
    context = SkillContext.from_settings(settings)
    toolbox = build_toolbox(context, AutoApprover(), settings.skills)
    session = Session.open(settings.data_dir / "s.jsonl")
    events = list(AgentLoop(FakeBackend(turns), toolbox).run(session, "go"))
    return [e for e in events if getattr(e, "type", "") == "tool_result"]


def calls(*pairs: tuple[str, dict[str, Any]]) -> list[Any]:
    turns: list[Any] = [AssistantMessage(tool_calls=[ToolCall.make(n, a)]) for n, a in pairs]
    return [*turns, AssistantMessage(content="done")]


from backends.fake import FakeBackend  # noqa: E402  (after the helpers it is used with)


@pytest.fixture(scope="module")
def wordcount_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/python-skill, built and installed by pip into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
            "--no-build-isolation", "--target", str(target), str(EXAMPLES / "python-skill"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return target


def test_a_python_skill_package_is_installed_approved_and_used(
    tmp_path: Path, wordcount_package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(wordcount_package))
    settings = settings_for(tmp_path)
    skills = Skills(settings)
    skill = skills.get("wordcount")
    assert skill.source == "plugin clawloop-wordcount" and skills.status(skill) == "new"
    # Not approved yet: the model does not get its tools.
    (unknown,) = run_loop(settings, calls(("word_count", {"path": "notes.md"})))
    assert not unknown.ok and "there is no tool named 'word_count'" in unknown.content
    assert approve(skills, "wordcount", console(), lambda q: True) == 0
    results = run_loop(
        settings,
        calls(
            ("word_count", {"path": "notes.md"}),
            ("line_count", {"path": "story.txt"}),
            ("word_count", {"path": "secret.env"}),
        ),
    )
    words, lines, refused = results
    assert words.ok and words.content == "notes.md: 4 words"
    assert lines.ok and lines.content == "1 story.txt", lines.content
    # Its default rules allow wordcount.*, but the manifest reads only .txt and .md files.
    assert not refused.ok and "did not declare read access to 'secret.env'" in refused.content


def test_a_skill_md_folder_installs_with_consent_and_runs_its_script(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    skills = Skills(settings)
    out = console()
    source = str(EXAMPLES / "instruction-skill" / "word-stats")
    assert install(skills, source, out, lambda q: False) == 1  # declined: nothing is left
    assert not (skills.folder / "word-stats").exists()
    assert install(skills, source, out, lambda q: True) == 0
    text = out.export_text()
    assert "shell commands: tr, sort, uniq, head" in text and "installed word-stats" in text
    context = SkillContext.from_settings(settings)
    skillset = SkillSet(context)
    skillset.load()
    prompt = system_prompt("Be helpful.", LiveToolbox(guard(skillset, AutoApprover()), skillset))
    assert "- word-stats: Find the most frequent words" in prompt
    assert "Use this skill when" not in prompt  # the instructions are read on demand
    script = {"skill": "word-stats", "script": "scripts/top_words.sh", "args": ["story.txt"]}
    read, ran, missing = run_loop(
        settings,
        calls(
            ("skill_read", {"skill": "word-stats"}),
            ("skill_run", script),
            ("skill_read", {"skill": "word-stats", "path": "../../../etc/passwd"}),
        ),
    )
    assert read.ok and "scripts/top_words.sh" in read.content
    assert ran.ok and "exit code: 0" in ran.content
    assert "4 the" in ran.content and "2 cat" in ran.content
    assert not missing.ok and "is not a file of the skill" in missing.content


def test_a_script_outside_its_manifest_is_refused(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, sandbox=SandboxSettings(allow=["skills.run", "shell"]))
    folder = tmp_path / "fetcher"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: fetcher\ndescription: Fetch a page.\n"
        "permissions:\n  commands: [echo, head]\n---\nRun scripts/get.sh.\n"
    )
    (folder / "scripts" / "get.sh").write_text(
        "#!/bin/sh\necho start\ncurl -s http://127.0.0.1:9/\n"
    )
    skills = Skills(settings)
    assert install(skills, str(folder), console(), lambda q: True) == 0
    (refused,) = run_loop(
        settings, calls(("skill_run", {"skill": "fetcher", "script": "scripts/get.sh"}))
    )
    assert not refused.ok
    assert (
        "did not declare the program `curl`" in refused.content and "echo, head" in refused.content
    )


def test_an_openclaw_skill_loads_unchanged(tmp_path: Path) -> None:
    folder = tmp_path / "weather"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: weather\ndescription: Get the weather with curl.\nhomepage: https://wttr.in\n"
        'metadata: {"openclaw": {"emoji": "🌤️", "requires": {"bins": ["curl"]}}}\n---\n'
        '# Weather\n\n```bash\ncurl -s "wttr.in/London?format=3"\n```\n'
    )
    skill = load_instruction_skill(folder)
    assert skill.name == "weather" and skill.requires == {"bins": ["curl"], "env": []}
    assert skill.permissions is not None and skill.permissions.commands == ["curl"]
    assert skill.permissions.network == []  # it declares no host, so it gets no network
    assert skill.instructions is not None and skill.instructions.startswith("# Weather")


def test_a_tampered_skill_is_disabled_until_approved_again(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    skills = Skills(settings)
    assert (
        install(
            skills, str(EXAMPLES / "instruction-skill" / "word-stats"), console(), lambda q: True
        )
        == 0
    )
    installed = skills.folder / "word-stats"
    md = installed / "SKILL.md"
    md.write_text(
        md.read_text().replace(
            "commands: [tr, sort, uniq, head]", "commands: [tr, sort, uniq, head, curl]"
        )
    )
    assert skills.status(skills.get("word-stats")) == "changed"
    (result,) = run_loop(settings, calls(("skill_read", {"skill": "word-stats"})))
    assert not result.ok  # no instruction skill is enabled, so there is no skill_read at all
    out = console()
    list_skills(skills, out)
    show_info(skills, "word-stats", out)
    assert check(skills, out, {}) == 1
    text = out.export_text()
    assert "changed: disabled" in text and "+ commands: curl" in text
    assert approve(skills, "word-stats", out, lambda q: False) == 1
    assert skills.status(skills.get("word-stats")) == "changed"
    assert approve(skills, "word-stats", out, lambda q: True) == 0
    (result,) = run_loop(settings, calls(("skill_read", {"skill": "word-stats"})))
    assert result.ok
    assert remove(skills, "word-stats", out) == 0 and not installed.exists()
    assert "word-stats" not in json.loads(skills.lock.path.read_text())["skills"]


def test_a_name_collision_names_both_sources(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    folder = settings.data_dir / "skills"
    folder.mkdir(parents=True)
    (folder / "one.py").write_text(file_skill("dup", "dup_a"))
    (folder / "two.py").write_text(file_skill("dup", "dup_b"))
    with pytest.raises(UserError) as caught:
        Skills(settings).discover()
    message = caught.value.message
    assert "two skills are named 'dup'" in message and "\n" not in message
    assert f"file {folder / 'one.py'}" in message and f"file {folder / 'two.py'}" in message
    (folder / "two.py").write_text(file_skill("sneaky", "shell"))
    skills = Skills(settings)
    (folder / "one.py").unlink()
    skills.lock.approve(skills.get("sneaky"))
    with pytest.raises(
        UserError, match=r"two skills define the tool 'shell': shell \(builtin\) and sneaky \(file "
    ):
        build_toolbox(SkillContext.from_settings(settings), AutoApprover())


def test_hot_reload_adds_disables_and_removes_a_skill(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    context = SkillContext.from_settings(settings)
    skillset = SkillSet(context)
    skillset.load()
    toolbox = LiveToolbox(guard(skillset, AutoApprover()))
    notices: list[str] = []
    watcher = SkillWatcher(skillset, toolbox, AutoApprover(), notices.append)
    watcher.start()
    lock = Skills(settings).lock
    path = settings.data_dir / "skills" / "greeter.py"

    def until(predicate: Any) -> None:
        end = time.monotonic() + 15
        while time.monotonic() < end:
            if predicate():
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out; notices: {notices}")

    try:
        path.write_text(file_skill("greeter"))
        until(lambda: any("greeter" in n for n in notices))  # found, waiting for approval
        assert "greeter_run" not in toolbox.names()
        lock.approve(Skills(settings).get("greeter"))
        until(lambda: "greeter_run" in toolbox.names())
        tool = toolbox.get("greeter_run")
        assert tool is not None and tool.call({"argv": ["echo", "hi"]}).render() == "hi"
        with pytest.raises(ToolError, match="did not declare the program `cat`"):
            tool.call({"argv": ["cat", "story.txt"]})
        path.write_text(file_skill("greeter", cmds="['echo', 'curl']"))  # changed: disabled
        until(lambda: "greeter_run" not in toolbox.names())
        assert "greeter (changed)" in notices[-1]
        path.unlink()
        until(lambda: "greeter" not in skillset.disabled and watcher.reloads >= 3)
    finally:
        watcher.stop()


def test_tools_list_honours_the_skills_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cli.tools_cmd as tools_cmd

    out = console()
    tools_cmd.list_tools(settings_for(tmp_path, skills=["files"]), out, as_json=True)
    names = {t["name"] for t in json.loads(out.export_text())}
    assert names == {"files_read", "files_write", "files_edit", "files_list", "files_search"}
    # Through the real settings loader, from the environment.
    monkeypatch.setenv("CLAWLOOP_SKILLS", "shell")
    monkeypatch.setenv("CLAWLOOP_WORKSPACE", str(tmp_path / "ws"))
    from typer.testing import CliRunner

    result = CliRunner().invoke(tools_cmd.tools_app, ["list", "--json"])
    assert result.exit_code == 0, result.output
    assert [t["name"] for t in json.loads(result.output)] == ["shell"]
    result = CliRunner().invoke(
        tools_cmd.tools_app, ["call", "files_read", '{"path": "story.txt"}']
    )
    assert result.exit_code == 2 or "there is no tool named 'files_read'" in str(result.exception)


def test_install_from_a_git_url_and_check(tmp_path: Path) -> None:
    repo = tmp_path / "word-stats.git"
    import shutil

    shutil.copytree(EXAMPLES / "instruction-skill" / "word-stats", repo)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "skill"], check=True)
    settings = settings_for(tmp_path)
    skills = Skills(settings)
    out = console()
    assert install(skills, f"file://{repo}", out, lambda q: True) == 0
    installed = skills.folder / "word-stats"
    assert (installed / "scripts" / "top_words.sh").exists() and not (installed / ".git").exists()
    assert skills.status(skills.get("word-stats")) == "approved"
    assert check(skills, out, {}) == 0 and "all 9 skills are ready" in out.export_text()
    with pytest.raises(UserError, match="already exists"):
        install(skills, f"file://{repo}", out, lambda q: True)
