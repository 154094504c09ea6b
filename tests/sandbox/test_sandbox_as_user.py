"""The escape suite again, as an unprivileged user this test creates (``useradd``).

clawloop run by root and clawloop run by an ordinary user build different sandboxes
(bubblewrap as root dropping to another uid inside, or bubblewrap in a user namespace), so
every attempt runs under both. This test, run as root, creates the user ``clawloop-sbx``
with its home under /opt (a home outside /home, as a service account has), and runs the
other escape modules as that user. The controls, which show the judges see a break, ran in
the root pass already; the root-mode module does not apply to an ordinary user.
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating a user needs root")

USER = "clawloop-sbx"
HOME = "/opt/clawloop-sbx-home"
HERE = Path(__file__).parent
MODULES = [
    "test_sandbox_escapes.py",
    "test_sandbox_persistence.py",
    "test_sandbox_shared_places.py",
    "test_sandbox_exhaustion.py",
    "test_sandbox_files_bounded.py",
    "test_sandbox_secrets_escape.py",
    "test_sandbox_workspace_refusal.py",
    "test_sandbox_egress.py",
    "test_sandbox_write_paths.py",
    "test_sandbox_third_pass_a.py",
    "test_sandbox_manifest_view.py",
    "test_sandbox_relay.py",
    "test_sandbox_scratch_and_memory.py",
    "test_sandbox_host_reach.py",
]


def _user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--create-home", "--home-dir", HOME, "--shell", "/bin/bash", USER],
            check=True,
        )
        return pwd.getpwnam(USER)


def _reachable_view(path: Path, uid: int) -> list[str]:
    """bwrap options that make ``path`` (the interpreter) reachable for ``uid``: a folder on
    the way that only root may enter (pyenv under /root, say) becomes an empty one holding
    just the next folder down, read-only. Nothing else of it is shown."""
    args: list[str] = []
    parts = path.parts
    for i in range(2, len(parts)):
        folder = Path(*parts[:i])
        if not os.stat(folder).st_mode & 0o001:
            child = Path(*parts[: i + 1])
            args += ["--perms", "0755", "--tmpfs", str(folder), "--ro-bind", str(child), str(child)]
            break
    return args


def test_the_escape_suite_holds_for_an_unprivileged_user() -> None:
    user = _user()
    python = Path(os.path.realpath(sys.executable))
    base = Path(f"/tmp/clawloop-sbx-{uuid.uuid4().hex[:8]}")
    base.mkdir(mode=0o700)
    os.chown(base, user.pw_uid, user.pw_gid)
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": user.pw_dir,
        "USER": USER,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    command = [
        "bwrap", "--dev-bind", "/", "/", *_reachable_view(python, user.pw_uid), "--die-with-parent",
        "--", "setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", "--",
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={base}/t",
        "-k", "not control", *[str(HERE / m) for m in MODULES],
    ]  # fmt: skip
    try:
        result = subprocess.run(
            command, cwd=HERE.parent.parent, env=env, capture_output=True, text=True, timeout=900
        )
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)
    tail = (result.stdout + result.stderr)[-4000:]
    assert result.returncode == 0, tail
    passed = re.search(r"(\d+) passed", result.stdout)
    assert passed and int(passed.group(1)) >= 100, tail
    assert "failed" not in result.stdout.splitlines()[-1], tail
