"""Nothing a command leaves behind runs later outside the sandbox.

Each attempt plants something (a git config key, a hook, a new repository, a start-up file,
clawloop's own config) and the judge then does on the host what a user would do next: run
``git status``, commit, start a shell. The attempt broke the sandbox if that creates the
marker file ``$PWN`` beside the workspace, which a sandboxed command cannot write itself.
The controls run the same attempts with the sandbox off and show the judge sees the break.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from sbx_support import RunFn

from sandbox.execute import CommandResult

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]


@dataclass
class Repo:
    ws: Path
    pwn: Path


def _git(cwd: Path, *args: str, home: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HOME=home) if home else None
    return subprocess.run(
        [*GIT, "-C", str(cwd), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
        env=env,
    )


@pytest.fixture
def repo(workspace: Path) -> Repo:
    """The workspace repository plus a nested repository ``sub``, a module ``m`` whose gitdir
    is ``.git/modules/m``, a ``core.hooksPath`` folder ``.githooks`` and a ``.bashrc``."""
    _git(workspace, "init", "-q", "sub")
    _git(workspace / "sub", "commit", "-q", "--allow-empty", "-m", "sub")
    (workspace / ".git" / "modules").mkdir()
    _git(workspace, "init", "-q", "--separate-git-dir", ".git/modules/m", "m")
    _git(workspace / "m", "commit", "-q", "--allow-empty", "-m", "m")
    (workspace / ".githooks").mkdir()
    _git(workspace, "config", "core.hooksPath", ".githooks")
    (workspace / ".bashrc").write_text("# the user's own\n")
    return Repo(workspace, workspace.parent / "outside" / "pwned")


def ran_nothing(*dirs: str) -> Callable[[CommandResult, Repo], None]:
    """The judge: git status, an alias, diff and a commit on the host run nothing planted."""

    def judge(result: CommandResult, r: Repo) -> None:
        for rel in dirs:
            where = r.ws / rel
            if not where.is_dir():
                continue
            for args in (
                ["status"],
                ["st"],
                ["diff", "HEAD"],
                ["commit", "-q", "--allow-empty", "-m", "x"],
            ):
                # Also as if the workspace were the home folder: a ~/.gitconfig written there.
                _git(where, *args)
                _git(where, *args, home=str(r.ws))
        assert not r.pwn.exists(), f"host git ran a planted program: {result.stdout}{result.stderr}"

    return judge


def rc_untouched(name: str) -> Callable[[CommandResult, Repo], None]:
    """The judge for start-up files: a login shell on the host, with HOME at the workspace."""

    def judge(result: CommandResult, r: Repo) -> None:
        rc = r.ws / name
        if rc.exists():
            subprocess.run(["bash", "-c", f". {rc}"], capture_output=True, timeout=10, check=False)
        assert not r.pwn.exists(), f"{name} ran on the host: {result.stdout}{result.stderr}"

    return judge


FSMON = 'core.fsmonitor "touch $PWN"'
HOOK = 'printf "#!/bin/sh\\ntouch $PWN\\n"'
# (id, script, judge); scripts see $PWN, a path beside the workspace that only the host can write.
ATTEMPTS: list[tuple[str, str, Callable[[CommandResult, Repo], None]]] = [
    (
        "rename-dot-git-and-edit",
        f"mv .git .g; git --git-dir=.g config {FSMON}; mv .g .git",
        ran_nothing("."),
    ),
    (
        "copy-dot-git-over",
        f"cp -a .git /tmp/g && git --git-dir=/tmp/g config {FSMON} && rm -rf .git;"
        " cp -a /tmp/g .git",
        ran_nothing("."),
    ),
    (
        "write-commondir",
        f"cp -a .git evil; git --git-dir=evil config {FSMON}; echo ../evil > .git/commondir",
        ran_nothing("."),
    ),
    (
        "replace-dot-git-with-gitdir-file",
        f"git init -q evil && git -C evil config {FSMON}; rm -rf .git;"
        " echo 'gitdir: evil/.git' > .git",
        ran_nothing("."),
    ),
    ("nested-repo-config", f"git -C sub config {FSMON}", ran_nothing("sub")),
    (
        "nested-repo-config-by-hand",
        "printf '[core]\\n\\tfsmonitor = touch %s\\n' $PWN >> sub/.git/config",
        ran_nothing("sub"),
    ),
    (
        "module-config",
        "printf '[core]\\n\\tfsmonitor = touch %s\\n' $PWN >> .git/modules/m/config",
        ran_nothing("m"),
    ),
    (
        "module-gitdir-file",
        "echo 'gitdir: ../evil-m' > m/.git; cp -a .git/modules/m evil-m;"
        f" git --git-dir=evil-m config {FSMON}",
        ran_nothing("m"),
    ),
    (
        "hooks-path-folder",
        f"{HOOK} > .githooks/pre-commit; chmod +x .githooks/pre-commit",
        ran_nothing("."),
    ),
    (
        "hooks-path-folder-renamed",
        f"mv .githooks .gh2; mkdir .githooks; {HOOK} > .githooks/pre-commit;"
        " chmod +x .githooks/pre-commit",
        ran_nothing("."),
    ),
    (
        "hooks-folder",
        f"{HOOK} > sub/.git/hooks/pre-commit; chmod +x sub/.git/hooks/pre-commit",
        ran_nothing("sub"),
    ),
    (
        "retarget-hooks-path",
        f"mkdir h2; {HOOK} > h2/pre-commit; chmod +x h2/pre-commit; git config core.hooksPath h2",
        ran_nothing("."),
    ),
    ("worktree-add", f"git worktree add -q wt2 && git -C wt2 config {FSMON}", ran_nothing("wt2")),
    (
        "new-nested-repo",
        f"git init -q newrepo && git -C newrepo config {FSMON}",
        ran_nothing("newrepo"),
    ),
    (
        "new-nested-repo-alias",
        'git init -q ar && git -C ar config alias.st "!touch $PWN"',
        ran_nothing("ar"),
    ),
    (
        "new-repo-by-mkdir",
        "mkdir -p nr/.git/objects nr/.git/refs && echo 'ref: refs/heads/main' > nr/.git/HEAD"
        " && printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = touch %s\\n' $PWN"
        " > nr/.git/config",
        ran_nothing("nr"),
    ),
    (
        "new-gitdir-file",
        f"mkdir sub3 && git init -q evil3 && git -C evil3 config {FSMON}"
        " && echo 'gitdir: ../evil3/.git' > sub3/.git",
        ran_nothing("sub3"),
    ),
    (
        "move-parent-and-recreate",
        f"mv sub sub_moved && git init -q sub && git -C sub config {FSMON}",
        ran_nothing("sub", "sub_moved"),
    ),
    (
        "symlink-dot-git",
        f"git init -q evil4 && git -C evil4 config {FSMON} && mkdir s4"
        " && ln -s ../evil4/.git s4/.git",
        ran_nothing("s4"),
    ),
    (
        "gitconfig-global",
        f'git config --global {FSMON}; git config --global alias.st "!touch $PWN"',
        ran_nothing("."),
    ),
    ("bashrc-append", 'echo "touch $PWN" >> .bashrc', rc_untouched(".bashrc")),
    ("bashrc-replace", 'rm -f .bashrc; echo "touch $PWN" > .bashrc', rc_untouched(".bashrc")),
    ("profile-created", 'echo "touch $PWN" > .profile', rc_untouched(".profile")),
    ("zshenv-created", 'echo "touch $PWN" > .zshenv', rc_untouched(".zshenv")),
]


def _script(r: Repo, script: str) -> str:
    return f"PWN={r.pwn}; {script}"


@pytest.mark.parametrize(
    ("script", "judge"), [a[1:] for a in ATTEMPTS], ids=[a[0] for a in ATTEMPTS]
)
def test_nothing_planted_runs_later(run: RunFn, repo: Repo, script: str, judge) -> None:  # type: ignore[no-untyped-def]
    result = run(_script(repo, script), timeout=20)
    assert not result.timed_out
    judge(result, repo)


@pytest.mark.parametrize(
    ("script", "judge"), [a[1:] for a in ATTEMPTS], ids=[a[0] for a in ATTEMPTS]
)
def test_control_planting_without_the_sandbox_is_seen(
    run: RunFn, repo: Repo, script: str, judge
) -> None:  # type: ignore[no-untyped-def]
    run(_script(repo, script), timeout=20, backend="off")
    with pytest.raises(AssertionError):
        judge(CommandResult(0, "", "", 0.0), repo)


def test_a_new_repository_is_moved_aside_and_its_keys_named(run: RunFn, workspace: Path) -> None:
    result = run(
        "git init -q fresh && git -C fresh config alias.st '!true'"
        " && git -C fresh config core.pager less"
    )
    assert not (workspace / "fresh" / ".git").exists()
    assert (workspace / "fresh" / ".git.clawloop-refused").is_dir()
    note = " ".join(result.notes)
    assert "fresh/.git" in note and "alias.st" in note and "core.pager" in note


def test_a_workspace_without_git_gets_none(run: RunFn, tmp_path: Path) -> None:
    bare = tmp_path / "plain"
    bare.mkdir()
    result = run("git init -q . && git config core.fsmonitor 'touch /tmp/x'", workspace=bare)
    assert not (bare / ".git").exists(), result.notes
    assert _git(bare, "rev-parse", "--git-dir").returncode != 0 or "outside" not in str(bare)


def test_control_a_new_repository_stays_without_the_sandbox(run: RunFn, workspace: Path) -> None:
    run("git init -q fresh", backend="off")
    assert (workspace / "fresh" / ".git").is_dir()


def test_clawloop_folders_in_the_workspace_are_invisible(run: RunFn, workspace: Path) -> None:
    own = workspace / ".clawloop"
    own.mkdir()
    (own / "config.toml").write_text('[sandbox]\nmode = "read-only"\n')
    (own / "audit.jsonl").write_text("{}\n")
    script = (
        "cat .clawloop/config.toml; ls -a .clawloop;"
        " echo 'mode = \"full-access\"' > .clawloop/config.toml;"
        " mv .clawloop .c2; mkdir -p .clawloop;"
        " echo 'mode = \"full-access\"' > .clawloop/config.toml"
    )
    result = run(script, hidden=[own])
    assert "read-only" not in result.stdout and "audit.jsonl" not in result.stdout
    assert (own / "config.toml").read_text() == '[sandbox]\nmode = "read-only"\n'
    assert not (workspace / ".c2").exists()


def test_control_clawloop_folder_is_seen_when_not_hidden(run: RunFn, workspace: Path) -> None:
    own = workspace / ".clawloop"
    own.mkdir()
    (own / "config.toml").write_text('mode = "read-only"\n')
    result = run("cat .clawloop/config.toml; echo 'mode = \"full-access\"' > .clawloop/config.toml")
    assert "read-only" in result.stdout
    assert "full-access" in (own / "config.toml").read_text()


def test_an_existing_start_up_file_is_readable_but_not_writable(run: RunFn, repo: Repo) -> None:
    result = run("cat .bashrc; echo more >> .bashrc")
    assert "the user's own" in result.stdout
    assert (repo.ws / ".bashrc").read_text() == "# the user's own\n"


def _outside_gitdir_attempt(run: RunFn, tmp_path: Path, **how: object) -> Path:
    """A worktree workspace whose repository lies outside it; plant in that repository."""
    main = tmp_path / "mainrepo"
    _git(tmp_path, "init", "-q", str(main))
    _git(main, "commit", "-q", "--allow-empty", "-m", "m")
    _git(main, "worktree", "add", "-q", str(tmp_path / "wt"))
    pwn = tmp_path / "outside" / "pwned"
    hook = '"$(git rev-parse --git-common-dir)/hooks/post-checkout"'
    script = f'git config {FSMON}; echo "touch $PWN" > {hook}'
    run(f"PWN={pwn}; {script}", workspace=tmp_path / "wt", **how)
    _git(tmp_path / "wt", "status")
    _git(main, "status")
    return pwn


def test_full_access_cannot_write_a_gitdir_outside_the_workspace(
    run: RunFn, tmp_path: Path
) -> None:
    assert not _outside_gitdir_attempt(run, tmp_path, mode="full-access").exists()


def test_control_an_outside_gitdir_is_written_without_the_sandbox(
    run: RunFn, tmp_path: Path
) -> None:
    assert _outside_gitdir_attempt(run, tmp_path, backend="off").exists()
