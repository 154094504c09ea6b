"""Code planted for later, clawloop's own folders, host-side hangs and kernel keyrings.

Each attempt is something a sandboxed command (or the model through the ``files`` tools)
could do, and the judge then does on the host what a user or clawloop does next: start the
workspace's Python, run a ``node_modules/.bin`` shim, read ``.envrc``, load the skills,
walk the workspace, read the session keyring. The attempt broke the sandbox if a marker
beside the workspace appears, a planted file is in place, a call hangs, or a secret shows.
The controls do the same without the sandbox (or with a plain ``open``) and show that the
judge sees the break. The module also runs as an unprivileged user (``test_sandbox_as_user``).
"""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sbx_support import RunFn

from agent.errors import ToolError, UserError
from agent.tools import Toolbox
from cli.approvals import AutoApprover
from cli.config import Settings
from sandbox.settings import ResourceLimits, SandboxSettings
from sandbox.workspace import OwnPlace, protect_installation
from skills.context import Places, SkillContext
from skills.lock import LockFile
from skills.registry import discover
from skills.skill import Skill
from skills.toolbox import build_toolbox

PLANT = "import os; open({marker!r}, 'w').write('ran')\n"


@pytest.fixture
def pwn(workspace: Path) -> Path:
    """The marker: beside the workspace, where a sandboxed command cannot write."""
    return workspace.parent / "outside" / "pwned"


@pytest.fixture
def venv(workspace: Path) -> Path:
    """A real virtual environment at ``.venv`` in the workspace, as a project has one."""
    env = workspace / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    return env


def _site(env: Path) -> Path:
    return next(env.glob("lib/python*/site-packages"))


def _start_python(env: Path) -> None:
    """What the user does next: run the workspace's Python (site start-up runs .pth files)."""
    subprocess.run([str(env / "bin" / "python"), "-c", "pass"], check=False, timeout=30)


def _toolbox(ws: Path, skills: list[str] | None = None, **settings: object) -> Toolbox:
    limits = ResourceLimits(timeout_s=5)
    context = SkillContext.create(ws, SandboxSettings(limits=limits, **settings))  # type: ignore[arg-type]
    return build_toolbox(context, AutoApprover(), skills)


def _call(tb: Toolbox, name: str, **args: object) -> str:
    tool = tb.get(name)
    assert tool is not None
    try:
        return tool.call(args).render()
    except ToolError as exc:
        return f"error: {exc}"


# --- 1. code the host runs later, planted in an environment ------------------------------


@pytest.mark.parametrize(
    "plant",
    [
        "evil.pth",  # a .pth line starting with `import` runs at every start
        "sitecustomize.py",
        "usercustomize.py",
        "_virtualenv.pth",
    ],
)
def test_start_up_files_cannot_be_planted_in_a_venv(
    run: RunFn, venv: Path, pwn: Path, plant: str
) -> None:
    site = _site(venv)
    line = f"import os; open('{pwn}', 'w').write('ran')"
    result = run(f"printf '%s\\n' \"{line}\" > {site}/{plant}; echo rc=$?")
    assert "rc=0" not in result.stdout, result.stdout + result.stderr
    _start_python(venv)
    assert not pwn.exists()


def test_control_a_planted_pth_runs_at_the_next_start(run: RunFn, venv: Path, pwn: Path) -> None:
    site = _site(venv)
    run(f"echo \"import os; open('{pwn}', 'w').write('ran')\" > {site}/evil.pth", backend="off")
    _start_python(venv)
    assert pwn.exists()  # the judge sees a break where there is one


@pytest.mark.parametrize(
    "script",
    [
        "ln -sf /bin/sh .venv/bin/python",
        "echo 'touch PWN' >> .venv/bin/activate",
        "mv .venv .venv-old",
        "rm -rf .venv",
        "chmod -R u+w .venv && echo x > .venv/pyvenv.cfg",
    ],
)
def test_a_venv_cannot_be_rewritten_or_moved(run: RunFn, venv: Path, script: str) -> None:
    before = (venv / "pyvenv.cfg").read_text()
    activate = (venv / "bin" / "activate").read_text()
    run(script)
    assert (venv / "pyvenv.cfg").read_text() == before
    assert (venv / "bin" / "activate").read_text() == activate
    assert (venv / "bin" / "python").resolve() != Path("/bin/sh").resolve()


def test_a_nested_venv_replaced_by_renaming_its_parent_is_refused(
    run: RunFn, workspace: Path, pwn: Path
) -> None:
    env = workspace / "proj" / ".venv"
    env.parent.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = _site(env).relative_to(workspace)
    script = (
        f"mv proj proj2 && mkdir -p proj && cp -r proj2/.venv proj/.venv && "
        f"echo \"import os; open('{pwn}', 'w').write('ran')\" > {site}/x.pth"
    )
    result = run(script)
    # Either the rename is refused, or the folder put in its place is moved aside after.
    moved = "in place of the environment" in " ".join(result.notes)
    assert moved or "proj2" not in os.listdir(workspace), (result.notes, result.stderr)
    if env.exists():
        _start_python(env)
    assert not pwn.exists()


def test_a_new_venv_is_allowed_and_read_only_from_the_next_call(
    run: RunFn, workspace: Path
) -> None:
    made = run("python3 -m venv --without-pip newenv && echo made")
    assert "made" in made.stdout, made.stderr
    site = run("ls -d newenv/lib/python*/site-packages").stdout.strip()
    second = run(f"echo 'import os' > {site}/late.pth && echo wrote")
    assert "wrote" not in second.stdout
    assert not (workspace / site / "late.pth").exists()


def test_a_conda_environment_is_read_only(run: RunFn, workspace: Path) -> None:
    env = workspace / "env"
    (env / "conda-meta").mkdir(parents=True)
    (env / "lib").mkdir()
    run("echo 'import os' > env/lib/sitecustomize.py")
    assert not (env / "lib" / "sitecustomize.py").exists()


def test_a_node_modules_shim_and_its_target_cannot_be_rewritten(
    run: RunFn, workspace: Path, pwn: Path
) -> None:
    pkg = workspace / "node_modules" / "tool"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "bin" / "cli.sh").write_text("#!/bin/sh\necho tool\n")
    (workspace / "node_modules" / ".bin").mkdir()
    (workspace / "node_modules" / ".bin" / "tool").symlink_to("../tool/bin/cli.sh")
    for script in (
        f"echo 'touch {pwn}' >> node_modules/tool/bin/cli.sh",
        f"rm node_modules/.bin/tool; printf '#!/bin/sh\\ntouch {pwn}\\n' > node_modules/.bin/tool",
        "mv node_modules nm-old",
    ):
        run(script)
    subprocess.run(["sh", str(workspace / "node_modules" / ".bin" / "tool")], check=False)
    assert not pwn.exists()


def test_control_a_node_modules_shim_runs_what_was_planted(
    run: RunFn, workspace: Path, pwn: Path
) -> None:
    (workspace / "node_modules" / ".bin").mkdir(parents=True)
    (workspace / "node_modules" / ".bin" / "tool").write_text("#!/bin/sh\necho tool\n")
    run(f"echo 'touch {pwn}' >> node_modules/.bin/tool", backend="off")
    subprocess.run(["sh", str(workspace / "node_modules" / ".bin" / "tool")], check=False)
    assert pwn.exists()


def test_full_access_keeps_a_venv_read_only(run: RunFn, venv: Path, pwn: Path) -> None:
    site = _site(venv)
    run(
        f"echo \"import os; open('{pwn}', 'w').write('ran')\" > {site}/evil.pth", mode="full-access"
    )
    _start_python(venv)
    assert not pwn.exists()


@pytest.mark.parametrize("rel", ["lib/x.pth", "lib/sitecustomize.py", "bin/activate"])
def test_the_files_tools_do_not_write_into_a_venv(venv: Path, rel: str) -> None:
    ws = venv.parent
    out = _call(_toolbox(ws), "files_write", path=f".venv/{rel}", content="import os\n")
    assert "write-protected" in out
    assert not (venv / rel).exists() or (venv / rel).read_text() != "import os\n"


def test_clawloop_installed_in_the_workspace_is_read_only(
    run: RunFn, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An editable checkout used as the workspace: its packages and its .venv.
    (workspace / "cli").mkdir()
    (workspace / "cli" / "main.py").write_text("print('clawloop')\n")
    env = workspace / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    places = [env, workspace / "cli"]
    monkeypatch.setattr("skills.context.installation", lambda: places)
    context = SkillContext.create(workspace, SandboxSettings(), environ={"HOME": "/nonexistent"})
    context.runner.run(["bash", "-c", f"echo 'import os' > cli/main.py; touch {_site(env)}/x.pth"])
    assert (workspace / "cli" / "main.py").read_text() == "print('clawloop')\n"
    assert not (_site(env) / "x.pth").exists()
    with pytest.raises(UserError, match=r"own installation .* no sandbox"):
        SkillContext.create(workspace, SandboxSettings(backend="off"), environ={"HOME": "/x"})


def test_control_an_installation_outside_the_workspace_is_left_alone(workspace: Path) -> None:
    assert protect_installation(workspace, True, [workspace.parent / "outside"]) == []
    assert protect_installation(workspace, True, [workspace / "cli"]) == [workspace / "cli"]


# --- 2. clawloop's own folders in the workspace; skill files and the lock ----------------


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"data_dir": "data"}, "data folder .* data_dir \\(or CLAWLOOP_DATA_DIR\\)"),
        ({"skills_dir": "my-skills"}, "skills folder .* skills_dir"),
        ({"config_path": "cfg/config.toml"}, "config .* CLAWLOOP_CONFIG"),
    ],
)
def test_clawloop_folders_inside_the_workspace_are_refused(
    workspace: Path, change: dict[str, str], words: str
) -> None:
    values = {k: workspace / v for k, v in change.items()}
    data = {"workspace": workspace, "data_dir": workspace.parent / "d", **values}
    settings = Settings.model_validate(data)
    with pytest.raises(UserError, match=f"contains clawloop's {words}") as caught:
        SkillContext.from_settings(settings)
    assert "\n" not in caught.value.message


def test_a_traces_folder_inside_the_workspace_is_refused(workspace: Path) -> None:
    place = OwnPlace(workspace / "traces", "traces folder", "data_dir")
    with pytest.raises(UserError, match="traces folder"):
        SkillContext.create(
            workspace, environ={"HOME": "/nonexistent"}, places=Places(others=(place,))
        )


def test_control_clawloop_folders_outside_the_workspace_are_accepted(workspace: Path) -> None:
    settings = Settings(workspace=workspace, data_dir=workspace.parent / "d")
    assert SkillContext.from_settings(settings).workspace == workspace.resolve()


def test_the_files_tools_do_not_read_what_the_shell_cannot_see(workspace: Path) -> None:
    home = workspace / "home"  # a home folder that lies inside the workspace
    home.mkdir()
    (home / "diary.txt").write_text("hidden-home-secret\n")
    context = SkillContext.create(workspace, environ={"HOME": str(home)})
    tb = build_toolbox(context, AutoApprover())
    shell = _call(tb, "shell", command="cat home/diary.txt")
    listed = _call(tb, "shell", command="ls -a home")
    read = _call(tb, "files_read", path="home/diary.txt")
    search = _call(tb, "files_search", pattern="hidden-home")
    listing = _call(tb, "files_list", path=".", recursive=True)
    assert "hidden-home-secret" not in shell + read + search + listing
    assert "diary" not in listed + search + listing and "hidden from the sandbox" in read


def test_control_a_plain_files_read_would_show_it(workspace: Path) -> None:
    (workspace / "home").mkdir()
    (workspace / "home" / "diary.txt").write_text("hidden-home-secret\n")
    context = SkillContext.create(workspace, environ={"HOME": "/nonexistent"})
    out = _call(build_toolbox(context, AutoApprover()), "files_read", path="home/diary.txt")
    assert "hidden-home-secret" in out


SKILL = """
{plant}
from agent.plugins import hookimpl
from skills.skill import Permissions, Skill

@hookimpl
def register_skills(register):
    register(Skill("planted", lambda c: [], "d", permissions=Permissions()))
"""


def _skill_setup(tmp_path: Path, pwn: Path) -> tuple[SkillContext, Path, LockFile]:
    folder = tmp_path / "data" / "skills"
    folder.mkdir(parents=True)
    path = folder / "planted.py"
    path.write_text(SKILL.format(plant=""))
    ws = tmp_path / "skill-ws"
    ws.mkdir()
    context = SkillContext.create(
        ws, places=Places(data_dir=tmp_path / "data"), environ={"HOME": "/nonexistent"}
    )
    lock = LockFile(tmp_path / "data" / "skills.lock.json")
    found = discover(folder).skills["planted"]  # the user approves it as it is
    lock.approve(found)
    return context, path, lock


def test_a_changed_skill_file_never_runs(tmp_path: Path, workspace: Path, pwn: Path) -> None:
    context, path, _ = _skill_setup(tmp_path, pwn)
    path.write_text(SKILL.format(plant=PLANT.format(marker=str(pwn))))
    build_toolbox(context, AutoApprover())
    assert not pwn.exists()


def test_a_new_skill_file_never_runs(tmp_path: Path, workspace: Path, pwn: Path) -> None:
    context, path, _ = _skill_setup(tmp_path, pwn)
    (path.parent / "other.py").write_text(SKILL.format(plant=PLANT.format(marker=str(pwn))))
    build_toolbox(context, AutoApprover())
    assert not pwn.exists()


def test_control_an_approved_skill_file_runs(tmp_path: Path, workspace: Path, pwn: Path) -> None:
    context, path, lock = _skill_setup(tmp_path, pwn)
    path.write_text(SKILL.format(plant=PLANT.format(marker=str(pwn))))
    found = discover(path.parent).skills["planted"]  # runs it: the user approves on purpose
    pwn.unlink()
    lock.approve(found)
    build_toolbox(context, AutoApprover())
    assert pwn.exists()  # the judge sees the import when the lock allows it
    assert isinstance(found, Skill)


# --- 3. the host side never hangs --------------------------------------------------------


def _within(seconds: float, fn: Callable[[], object]) -> object:
    """``fn()``'s value, or a failure if it does not return within ``seconds``."""
    box: list[object] = []
    failed: list[BaseException] = []

    def call() -> None:
        try:
            box.append(fn())
        except BaseException as exc:  # re-raised below, on the test's thread
            failed.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    began = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    assert time.monotonic() - began < seconds
    if failed:
        raise failed[0]
    return box[0] if box else None


@pytest.fixture
def traps(workspace: Path) -> Path:
    """FIFOs at ``.git/config`` (and in a nested repository) and ``notes.txt``; a link loop."""
    config = workspace / ".git" / "config"
    config.unlink()
    os.mkfifo(config)
    (workspace / "sub" / ".git").mkdir(parents=True)
    os.mkfifo(workspace / "sub" / ".git" / "config")
    os.mkfifo(workspace / "notes.txt")
    (workspace / "loop-a").symlink_to("loop-b")
    (workspace / "loop-b").symlink_to("loop-a")
    (workspace / "dir").mkdir()
    (workspace / "dir" / "up").symlink_to("..")
    return workspace


def test_a_fifo_at_git_config_does_not_hang_a_shell_call(run: RunFn, traps: Path) -> None:
    result = _within(10, lambda: run("echo still-here"))
    assert "still-here" in getattr(result, "stdout", "")


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("files_read", {"path": "notes.txt"}),
        ("files_read", {"path": "loop-a"}),
        ("files_read", {"path": ".git/config"}),
        ("files_search", {"pattern": "x"}),
        ("files_list", {"path": ".", "recursive": True}),
        ("find_text", {"text": "hello"}),
        ("files_edit", {"path": "notes.txt", "old_text": "a", "new_text": "b"}),
    ],
)
def test_fifos_and_link_loops_do_not_hang_the_tools(
    traps: Path, tool: str, args: dict[str, object]
) -> None:
    tb = _toolbox(traps, ["files", "simple", "shell"])
    _within(10, lambda: _call(tb, tool, **args))


def test_control_a_plain_open_of_the_fifo_blocks(traps: Path) -> None:
    thread = threading.Thread(target=lambda: (traps / "notes.txt").read_text(), daemon=True)
    thread.start()
    thread.join(1)
    assert thread.is_alive()  # the judge sees a hang where there is one
    fd = os.open(traps / "notes.txt", os.O_WRONLY | os.O_NONBLOCK)  # release the reader
    os.close(fd)


# --- 4. kernel keyrings ------------------------------------------------------------------

_KEYCTL = {"x86_64": 250, "aarch64": 219}
_JOIN_SESSION_KEYRING = 1


@pytest.fixture
def session_key() -> Iterator[tuple[str, str]]:
    """A fresh session keyring for this process holding one secret key: (key id, secret)."""
    libc = ctypes.CDLL(None, use_errno=True)
    number = _KEYCTL.get(platform.machine())
    if number is not None:  # a keyring of this test's own, not the caller's
        libc.syscall(number, _JOIN_SESSION_KEYRING, None)
    secret = f"keyring-secret-{os.getpid()}"
    added = subprocess.run(
        ["keyctl", "add", "user", "clawloop-test-key", secret, "@s"],
        capture_output=True,
        text=True,
        check=True,
    )
    key = added.stdout.strip()
    try:
        yield key, secret
    finally:
        subprocess.run(["keyctl", "unlink", key, "@s"], capture_output=True, check=False)


@pytest.mark.parametrize(
    "script",
    [
        "keyctl print {key}",
        "keyctl pipe {key}",
        "keyctl show @s",
        "keyctl print %user:clawloop-test-key",
        "keyctl request user clawloop-test-key | xargs keyctl print",
        "cat /proc/keys /proc/key-users",
        "python3 -c 'import ctypes; print(ctypes.CDLL(None).syscall({nr}, 11, {key}, 0, 0))'",
    ],
)
def test_the_session_keyring_is_out_of_reach(
    run: RunFn, session_key: tuple[str, str], script: str
) -> None:
    key, secret = session_key
    result = run(script.format(key=key, nr=_KEYCTL.get(platform.machine(), 0)))
    shown = result.stdout + result.stderr
    assert secret not in shown, shown
    if "clawloop-test-key" not in script:  # else keyctl repeats the name it was given
        assert "clawloop-test-key" not in shown, shown


def test_control_the_keyring_is_readable_without_the_sandbox(
    run: RunFn, session_key: tuple[str, str]
) -> None:
    key, secret = session_key
    result = run(f"keyctl print {key}; keyctl show @s", backend="off")
    assert secret in result.stdout and "clawloop-test-key" in result.stdout


# --- 5. files a host tool runs by itself: .envrc, .vscode, .npmrc ------------------------


@pytest.mark.parametrize(
    ("script", "planted"),
    [
        ("echo 'touch PWN' > .envrc", ".envrc"),
        ("mkdir -p app && echo 'touch PWN' > app/.envrc", "app/.envrc"),
        ("mkdir -p .vscode && echo '{\"tasks\": []}' > .vscode/tasks.json", ".vscode/tasks.json"),
        ("echo 'node-options=--require ./x.js' > .npmrc", ".npmrc"),
        ("echo 'yarnPath: ./x.js' > .yarnrc.yml", ".yarnrc.yml"),
    ],
)
def test_a_new_tool_file_is_refused(run: RunFn, workspace: Path, script: str, planted: str) -> None:
    result = run(script)
    assert not (workspace / planted).exists(), result.notes
    assert any("clawloop-refused" in n for n in result.notes), result.notes


def test_an_existing_tool_file_is_read_only(run: RunFn, workspace: Path) -> None:
    (workspace / "app").mkdir()
    (workspace / "app" / ".envrc").write_text("export A=1\n")
    (workspace / ".vscode").mkdir()
    (workspace / ".vscode" / "settings.json").write_text("{}\n")
    run(
        "echo 'touch PWN' >> app/.envrc; echo '{\"x\": 1}' > .vscode/settings.json; "
        "mv app app2; echo 'touch PWN' > app/.envrc"
    )
    assert (workspace / ".vscode" / "settings.json").read_text() == "{}\n"
    for envrc in workspace.rglob(".envrc"):
        assert "PWN" not in envrc.read_text()
    files = _call(_toolbox(workspace), "files_write", path=".vscode/tasks.json", content="{}")
    assert "write-protected" in files


def test_control_an_envrc_is_written_without_the_sandbox(run: RunFn, workspace: Path) -> None:
    run("echo 'touch PWN' > .envrc", backend="off")
    assert "PWN" in (workspace / ".envrc").read_text()
