"""Declared write paths: the workspace is read-only but for the parts a manifest names.

Each command runs under real bubblewrap; what it could or could not write is checked on the
host afterwards.
"""

from __future__ import annotations

import os
from pathlib import Path

from sandbox.execute import CommandResult
from sandbox.runner import Grant, SandboxRunner
from sandbox.settings import Mode, ResourceLimits, SandboxSettings
from sandbox.writable import writable_parts


def run_writing(
    workspace: Path, globs: list[str], script: str, mode: Mode = "workspace-write"
) -> CommandResult:
    settings = SandboxSettings(mode=mode, limits=ResourceLimits(timeout_s=20))
    runner = SandboxRunner(settings, workspace, dict(os.environ), grant=Grant(write_paths=globs))
    return runner.run(["bash", "-c", script])


def test_only_the_declared_folder_is_writable(workspace: Path) -> None:
    victim = workspace.parent / "outside" / "victim.txt"
    result = run_writing(
        workspace,
        ["out/**"],
        """
        echo made > out/result.txt && mkdir -p out/deep && echo deeper > out/deep/x && echo in-ok
        echo changed > hello.txt; echo "root: $?"
        echo new > new.txt; echo "new: $?"
        echo escaped > ../outside/victim.txt; echo "outside: $?"
        """,
    )
    out = result.stdout
    assert "in-ok" in out and "root: 1" in out and "new: 1" in out and "outside: 1" in out, (
        out + result.stderr
    )
    assert (workspace / "out" / "result.txt").read_text() == "made\n"
    assert (workspace / "out" / "deep" / "x").read_text() == "deeper\n"
    assert (workspace / "hello.txt").read_text() == "hello from the workspace\n"
    assert not (workspace / "new.txt").exists()
    assert victim.read_text() == "untouched\n"


def test_a_declared_folder_that_is_a_link_out_is_not_writable(workspace: Path) -> None:
    (workspace / "out").symlink_to(workspace.parent / "outside")
    result = run_writing(
        workspace, ["out/**"], "echo escaped > out/victim.txt; echo rc=$?; echo x > out/new"
    )
    assert "rc=1" in result.stdout
    assert (workspace.parent / "outside" / "victim.txt").read_text() == "untouched\n"
    assert not (workspace.parent / "outside" / "new").exists()


def test_a_file_glob_lets_matching_files_be_rewritten_but_not_created(workspace: Path) -> None:
    (workspace / "data").mkdir()
    (workspace / "data" / "a.csv").write_text("1\n")
    (workspace / "data" / "a.txt").write_text("keep\n")
    result = run_writing(
        workspace,
        ["data/*.csv"],
        """
        echo 2 >> data/a.csv; echo "csv: $?"
        echo no > data/a.txt; echo "txt: $?"
        echo no > data/b.csv; echo "new csv: $?"
        """,
    )
    assert "csv: 0" in result.stdout and "txt: 1" in result.stdout
    assert "new csv: 1" in result.stdout
    assert (workspace / "data" / "a.csv").read_text() == "1\n2\n"
    assert (workspace / "data" / "a.txt").read_text() == "keep\n"
    assert not (workspace / "data" / "b.csv").exists()


def test_git_metadata_stays_read_only_inside_a_writable_part(workspace: Path) -> None:
    before = (workspace / ".git" / "HEAD").read_text()
    result = run_writing(workspace, ["**"], "echo x > .git/HEAD; echo rc=$?; echo ok > any.txt")
    assert "rc=1" in result.stdout
    assert (workspace / ".git" / "HEAD").read_text() == before
    assert (workspace / "any.txt").read_text() == "ok\n"  # `**` is the whole workspace


def test_read_only_mode_wins_over_declared_writes(workspace: Path) -> None:
    result = run_writing(workspace, ["out/**"], "echo x > out/f; echo rc=$?", mode="read-only")
    assert "rc=1" in result.stdout
    assert not (workspace / "out").exists()


def test_what_each_glob_grants(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("")
    (tmp_path / "docs" / "b.txt").write_text("")
    parts = writable_parts(
        tmp_path,
        ["out/**", "./build/**/*", "report.txt", "docs/*.md", "/elsewhere/**", "../up/**"],
    )
    assert parts.folders == ["out", "build"] and not parts.whole
    assert parts.paths == ["report.txt", "docs/a.md"]
    assert writable_parts(tmp_path, [f"{tmp_path}/out/**"]).folders == ["out"]
    assert writable_parts(tmp_path, ["**"]).whole
