"""A skill's manifest held by the view its commands run in, not by reading its command lines.

The skill declares ``commands: [echo, cat]``, ``read: [docs/**]`` and ``write: [out/**]``.
Each attempt starts a program it did not declare, in a way a command-line parser cannot see
(``${x@P}``, ``declare``, ``trap``, ``eval``, ``exec``, an absolute path, the loader), runs
a binary it can read or write (planted in the workspace, or copied to ``/tmp``, ``/dev/shm``
or a write path, directly or through the loader: the exec guard's part), or reads a
workspace file outside ``docs/``. It broke the manifest if its marker appears in
``out/`` (the one place the skill may write, so only the undeclared program could have made
it) or the secret shows. The controls run the very same lines in a sandbox without the
manifest, and show that each trick works in bash and that the judge sees it. Most attempts go
straight to the runner, so that no parser stands in front; the last ones go through a skill's
scoped context, the path every non-built-in skill takes. The module also runs as an
unprivileged user (``test_sandbox_as_user``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.errors import ToolError
from sandbox.execute import CommandResult
from sandbox.runner import Grant, SandboxRunner
from sandbox.settings import ResourceLimits, SandboxSettings
from skills.context import SkillContext
from skills.permissions import check_argv, scoped_context
from skills.skill import Permissions

SECRET = "manifest-view-secret-5c2e"
LOADER = "/lib64/ld-linux-x86-64.so.2"
MANIFEST = Permissions(commands=["echo", "cat"], read=["docs/**"], write=["out/**"])
SETTINGS = SandboxSettings(limits=ResourceLimits(timeout_s=10, processes=64, memory_mb=1024))

# Each makes out/marker with a program the manifest does not declare.
UNDECLARED = {
    "prompt-expansion": "x='$(touch out/marker)'; : \"${x@P}\"",
    "declare": "declare -a 'a=([0]=$(touch out/marker))'",
    "trap-exit": "trap 'touch out/marker' EXIT; echo bye",
    "eval": "eval 'tou''ch out/marker'",
    "exec": "exec touch out/marker",
    "absolute-path": "/usr/bin/touch out/marker",
    "python-by-path": '/usr/bin/python3 -c \'open("out/marker", "w")\'',
    "built-name": "c=tou; ${c}ch out/marker",
    "nested-shell": "bash -c 'touch out/marker'",
    "loader": "/lib64/ld-linux-x86-64.so.2 /usr/bin/touch out/marker",
    # A program the skill can read or write (docs/tool and out/tool are copies of touch), or
    # copy with a declared program, run directly or through the loader of the view.
    "loader-on-a-shown-file": f"{LOADER} docs/tool out/marker",
    "planted-executable": "out/tool out/marker",
    "copied-to-tmp": f"cat docs/tool > /tmp/t; {LOADER} /tmp/t out/marker",
    "copied-to-shm": f"cat docs/tool > /dev/shm/t; {LOADER} /dev/shm/t out/marker",
    "copied-to-a-write-path": f"cat docs/tool > out/t; {LOADER} out/t out/marker",
}
# Each prints the secret that lies outside docs/.
UNDECLARED_READS = {
    "plain": "cat secret.txt",
    "parent": "cd docs && cat ../secret.txt",
    "absolute": 'cat "$PWD/secret.txt"',
    "link-in-docs": "cat docs/link.txt",
    "glob": "cat *.txt",
    "redirect": 'while read -r line; do echo "$line"; done < secret.txt',
}


@pytest.fixture
def ws(workspace: Path) -> Path:
    """The shared workspace, with documents the skill may read and a secret beside them."""
    (workspace / "docs").mkdir()
    (workspace / "docs" / "guide.md").write_text("the guide\n")
    (workspace / "secret.txt").write_text(SECRET + "\n")
    (workspace / "docs" / "link.txt").symlink_to("../secret.txt")
    (workspace / "out").mkdir()
    touch = Path("/usr/bin/touch").read_bytes()
    (workspace / "docs" / "tool").write_bytes(touch)
    (workspace / "out" / "tool").write_bytes(touch)
    (workspace / "out" / "tool").chmod(0o755)
    return workspace


def _runner(ws: Path, manifest: bool) -> SandboxRunner:
    """The runner a skill with :data:`MANIFEST` gets, or (``manifest=False``) the same sandbox
    without the program and read restriction."""
    if not manifest:
        return SandboxRunner(
            SETTINGS, ws, dict(os.environ), grant=Grant(write_paths=MANIFEST.write)
        )
    return SandboxRunner(
        SETTINGS,
        ws,
        dict(os.environ),
        grant=Grant(
            write_paths=MANIFEST.write, programs=MANIFEST.commands, read_paths=MANIFEST.read
        ),
    )


def _bash(runner: SandboxRunner, script: str) -> CommandResult:
    return runner.run(["bash", "-c", script])


@pytest.mark.parametrize("name", list(UNDECLARED))
def test_an_undeclared_program_does_not_run(ws: Path, name: str) -> None:
    result = _bash(_runner(ws, manifest=True), UNDECLARED[name])
    assert not (ws / "out" / "marker").exists(), (result.stdout, result.stderr)


@pytest.mark.parametrize("name", list(UNDECLARED))
def test_control_the_same_lines_run_undeclared_programs_without_the_manifest(
    ws: Path, name: str
) -> None:
    result = _bash(_runner(ws, manifest=False), UNDECLARED[name])
    assert (ws / "out" / "marker").exists(), (result.stdout, result.stderr)


@pytest.mark.parametrize("name", list(UNDECLARED_READS))
def test_a_file_outside_the_read_paths_is_not_there(ws: Path, name: str) -> None:
    result = _bash(_runner(ws, manifest=True), UNDECLARED_READS[name])
    assert SECRET not in result.stdout + result.stderr
    assert "No such file" in result.stderr or name == "glob", result.stderr


@pytest.mark.parametrize("name", list(UNDECLARED_READS))
def test_control_the_same_reads_show_the_secret_without_the_manifest(ws: Path, name: str) -> None:
    result = _bash(_runner(ws, manifest=False), UNDECLARED_READS[name])
    assert SECRET in result.stdout, result.stderr


def test_only_the_declared_programs_and_paths_are_in_the_view(ws: Path) -> None:
    script = "echo /usr/bin/* /usr/sbin/* /usr/local/bin/*; echo; shopt -s dotglob; echo * docs/*"
    result = _bash(_runner(ws, manifest=True), script)
    programs, workspace = result.stdout.split("\n\n")
    shown = {os.path.basename(p) for p in programs.split()} - {"*"}
    # bash starts the command line; setpriv drops root's rights when clawloop runs as root.
    assert shown <= {"bash", "cat", "echo", "setpriv"}, shown
    assert workspace.split() == ["docs", "out", "docs/guide.md", "docs/link.txt", "docs/tool"]


def test_the_declared_programs_still_work(ws: Path) -> None:
    script = "cat docs/guide.md; echo made > out/report.txt; cat out/report.txt; echo $?"
    result = _bash(_runner(ws, manifest=True), script)
    assert result.stdout == "the guide\nmade\n0\n", result.stderr
    assert (ws / "out" / "report.txt").read_text() == "made\n"


def test_a_declared_script_interpreter_brings_its_library(ws: Path) -> None:
    runner = SandboxRunner(
        SETTINGS,
        ws,
        dict(os.environ),
        grant=Grant(programs=["python3"], read_paths=["docs/**"]),
    )
    source = "import json, pathlib; print(json.dumps(pathlib.Path('docs/guide.md').read_text()))"
    result = runner.run(["python3", "-c", source])
    assert result.exit_code == 0 and result.stdout == '"the guide\\n"\n', result.stderr
    hidden = runner.run(["python3", "-c", "import subprocess; subprocess.run(['id'])"])
    assert hidden.exit_code != 0 and "No such file" in hidden.stderr


def test_git_metadata_outside_the_read_paths_is_not_shown(ws: Path) -> None:
    result = _bash(_runner(ws, manifest=True), "cat .git/config; cat hello.txt")
    assert "[core]" not in result.stdout and "hello from" not in result.stdout
    control = _bash(_runner(ws, manifest=False), "cat .git/config; cat hello.txt")
    assert "[core]" in control.stdout and "hello from" in control.stdout


# --- through a skill's context: the parser refuses early what it sees; the view the rest ---


def _skill(ws: Path) -> SkillContext:
    context = SkillContext.create(ws, SETTINGS)
    return scoped_context(context, "probe", MANIFEST)


def _skill_bash(ws: Path, script: str) -> str:
    try:
        result = _skill(ws).runner.run(["bash", "-c", script])
    except ToolError as exc:
        return f"refused: {exc}"
    return result.stdout + result.stderr


@pytest.mark.parametrize("name", ["declare", "trap-exit", "prompt-expansion"])
def test_a_skill_cannot_start_what_the_parser_misses(ws: Path, name: str) -> None:
    shown = _skill_bash(ws, UNDECLARED[name] + "; cat docs/guide.md")
    assert not (ws / "out" / "marker").exists(), shown
    assert "the guide" in shown or shown.startswith("refused:"), shown


def test_a_skill_reads_only_its_read_paths(ws: Path) -> None:
    shown = _skill_bash(ws, "cat docs/guide.md secret.txt docs/link.txt")
    assert "the guide" in shown and SECRET not in shown, shown


def test_control_the_parser_lets_declare_and_trap_through() -> None:
    """The manifest check on the command line passes these: what stopped them is the view."""
    for name in ("declare", "trap-exit"):
        check_argv("probe", MANIFEST, ["bash", "-c", UNDECLARED[name]])


def test_a_guarded_command_holds_no_capability_and_keeps_the_seccomp_filter(ws: Path) -> None:
    # The exec guard needs CAP_SYS_ADMIN to remount and loads the filter itself: none of that
    # may reach the command.
    runner = SandboxRunner(SETTINGS, ws, dict(os.environ), grant=Grant(programs=["cat", "unshare"]))
    script = "cat /proc/self/status; unshare -U true && echo made-a-user-namespace"
    result = _bash(runner, script)
    status = dict(line.split(":\t", 1) for line in result.stdout.splitlines() if ":\t" in line)
    assert status["Seccomp"] == "2" and status["NoNewPrivs"] == "1", result.stdout
    assert status["CapEff"] == status["CapPrm"] == status["CapBnd"] == "0" * 16, result.stdout
    assert "made-a-user-namespace" not in result.stdout, result.stdout
    mounts = runner.run(["cat", "/proc/self/mountinfo"]).stdout.splitlines()
    tmp = next(line for line in mounts if line.split()[4] == "/tmp")
    assert "noexec" in tmp.split()[5], tmp
