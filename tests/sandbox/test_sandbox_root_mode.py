"""Root mode: no permission ever lands on an inode outside the workspace, and none stays.

When clawloop runs as root, commands run as another uid. Each attempt tries to turn the
workspace grant into access elsewhere: a hard link to a root-only file, a file beside the
workspace in a private folder, a link out, a rename race. The judge reads, on the host, the
ACLs and contents of those files after the call. Root only: without root there is no grant.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

import pytest
from sbx_support import RunFn

from sandbox.grant import grant, identity_for, revoke

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="root mode exists only as root")
ACL = "system.posix_acl_access"


def _acl_users(path: Path) -> list[str]:
    """Named users in a file's ACL, as getfacl prints them."""
    out = subprocess.run(
        ["getfacl", "-cp", "--", str(path)], capture_output=True, text=True, check=False
    ).stdout
    return [line for line in out.splitlines() if line.startswith("user:") and line[5] != ":"]


def _no_grants_anywhere(*roots: Path) -> None:
    for root in roots:
        for dirpath, dirnames, files in os.walk(root):
            for name in [*dirnames, *files]:
                path = Path(dirpath, name)
                if not path.is_symlink():
                    named = _acl_users(path)
                    assert named == [], f"{path} keeps a grant: {named}"


@pytest.fixture
def private(tmp_path: Path) -> Path:
    """A root-only folder holding the workspace and a secret beside it."""
    box = tmp_path / "private"
    box.mkdir(mode=0o700)
    (box / "ws").mkdir()
    (box / "ws" / "a.txt").write_text("a\n")
    (box / "beside.txt").write_text("beside secret\n")
    os.chmod(box / "beside.txt", 0o600)
    return box


def test_hard_link_to_a_root_only_file_gains_nothing(run: RunFn, tmp_path: Path) -> None:
    ws = tmp_path / "w2"
    ws.mkdir()
    secret = tmp_path / "root-only.txt"
    secret.write_text("root only\n")
    os.chmod(secret, 0o600)
    os.link(secret, ws / "hl")
    result = run("cat hl; echo pwned >> hl; chmod 666 hl", workspace=ws)
    assert secret.read_text() == "root only\n" and "root only" not in result.stdout
    assert _acl_users(secret) == [] and secret.stat().st_mode & 0o777 == 0o600
    assert any("hl" in note and "hard links" in note for note in result.notes)


def test_control_the_old_recursive_grant_lands_on_the_linked_file(tmp_path: Path) -> None:
    ws = tmp_path / "w2"
    ws.mkdir()
    secret = tmp_path / "root-only.txt"
    secret.write_text("root only\n")
    os.chmod(secret, 0o600)
    os.link(secret, ws / "hl")
    subprocess.run(["setfacl", "-R", "-m", "u:65534:rwX", str(ws)], check=True)
    assert _acl_users(secret) != []  # the judge sees the grant the old design made


def test_a_file_beside_the_workspace_in_a_private_folder(run: RunFn, private: Path) -> None:
    result = run(
        "cat ../beside.txt; ls -a ..; cat $(dirname $PWD)/beside.txt", workspace=private / "ws"
    )
    assert "beside secret" not in result.stdout and "beside.txt" not in result.stdout
    assert _acl_users(private) == [] and _acl_users(private.parent) == []
    assert result.exit_code is not None


def test_control_a_traversal_grant_lets_the_file_beside_be_listed(
    run: RunFn, private: Path
) -> None:
    subprocess.run(["setfacl", "-m", "u:65534:rx", str(private)], check=True)
    os.chmod(private / "beside.txt", 0o644)
    result = run("ls -a /proc/self/root/..; ls -a ..", workspace=private / "ws", mode="full-access")
    assert "beside.txt" in result.stdout  # the judge sees what a parent grant exposes


def test_no_grant_stays_after_a_call(run: RunFn, private: Path) -> None:
    ws = private / "ws"
    (ws / "sub").mkdir()
    (ws / "sub" / "b.txt").write_text("b\n")
    result = run("echo more >> a.txt && echo c > sub/c.txt && cat sub/b.txt", workspace=ws)
    assert result.exit_code == 0, result.stderr
    assert (ws / "a.txt").read_text() == "a\nmore\n"
    _no_grants_anywhere(private)
    assert (ws / "a.txt").stat().st_mode & 0o777 == 0o644  # the mode is restored too


def test_control_a_grant_is_seen_while_it_is_there(private: Path) -> None:
    ws = private / "ws"
    grant(ws, 65534, write=True)
    with pytest.raises(AssertionError):
        _no_grants_anywhere(private)
    revoke(ws, 65534)
    _no_grants_anywhere(private)


def test_links_out_of_the_workspace_are_not_followed(run: RunFn, tmp_path: Path) -> None:
    ws = tmp_path / "w2"
    ws.mkdir()
    outside = tmp_path / "out"
    outside.mkdir(mode=0o700)
    (outside / "f.txt").write_text("outside\n")
    os.chmod(outside / "f.txt", 0o600)
    (ws / "link").symlink_to(outside)
    (ws / "flink").symlink_to(outside / "f.txt")
    result = run("cat link/f.txt flink; echo x > link/new; echo x >> flink", workspace=ws)
    assert "outside" not in result.stdout
    assert not (outside / "new").exists() and (outside / "f.txt").read_text() == "outside\n"
    _no_grants_anywhere(outside)


def test_a_rename_race_does_not_break_or_leak_the_grant(run: RunFn, tmp_path: Path) -> None:
    ws = tmp_path / "w2"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "x").write_text("x\n")
    outside = tmp_path / "target"
    outside.mkdir(mode=0o700)
    (outside / "t").write_text("t\n")
    race = "for i in $(seq 1 3000); do mv d e 2>/dev/null; mv e d 2>/dev/null; done"
    first = run(f"({race}) & sleep 0.5; echo first", workspace=ws)
    second = run("ls d e 2>/dev/null; echo ok > y && echo second", workspace=ws)
    assert "second" in second.stdout, second.stderr + first.stderr
    _no_grants_anywhere(ws, outside)


def test_a_fifo_or_device_in_the_workspace_does_not_block_the_grant(
    run: RunFn, tmp_path: Path
) -> None:
    ws = tmp_path / "w2"
    ws.mkdir()
    os.mkfifo(ws / "fifo")
    result = run("echo done", workspace=ws, timeout=10)
    assert result.stdout == "done\n" and result.seconds < 5


def test_a_workspace_owned_by_a_user_runs_as_that_user_with_no_grant(
    run: RunFn, tmp_path: Path
) -> None:
    user = pwd.getpwnam("nobody")
    ws = tmp_path / "owned"
    ws.mkdir()
    (ws / "f.txt").write_text("f\n")
    os.chown(ws, user.pw_uid, user.pw_gid)
    os.chown(ws / "f.txt", user.pw_uid, user.pw_gid)
    identity = identity_for(ws, 12345)
    assert identity.uid == user.pw_uid and not identity.needs_grant
    result = run("id -u; echo g >> f.txt", workspace=ws)
    assert result.stdout.strip() == str(user.pw_uid) and (ws / "f.txt").read_text() == "f\ng\n"
    _no_grants_anywhere(ws)


def test_the_start_check_grants_the_workspace_folder_alone(
    private: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check that bubblewrap starts runs no command on the files, so it walks none of them
    (a workspace holding a virtual environment has 100,000 inodes)."""
    import sandbox.runner as runner_module
    from sandbox.grant import Grant
    from sandbox.runner import SandboxRunner
    from sandbox.settings import SandboxSettings

    ws = private / "ws"
    ws.chmod(0o700)  # the sandbox's uid needs the folder's own grant to start in it
    seen: list[tuple[str, bool]] = []

    def spy_grant(workspace: Path, uid: int, write: bool, whole: bool = True) -> Grant:
        seen.append(("grant", whole))
        given = grant(workspace, uid, write, whole)
        assert _acl_users(ws) and not _acl_users(ws / "a.txt")  # the folder, not its files
        return given

    def spy_revoke(workspace: Path, uid: int, whole: bool = True) -> int:
        seen.append(("revoke", whole))
        return revoke(workspace, uid, whole)

    monkeypatch.setattr(runner_module, "grant", spy_grant)
    monkeypatch.setattr(runner_module, "revoke", spy_revoke)
    SandboxRunner(SandboxSettings(), ws, dict(os.environ), []).check()
    assert seen == [("grant", False), ("revoke", False)]
    _no_grants_anywhere(private)
