"""What the sandbox adds to one shell call and to one files call, side by side.

Usage: PYTHONPATH=. python bench/sandbox_overhead.py [--runs 50] [--files 200] [--only TEXT]
Each row runs ``bash -c true`` (the shell tool's shape; with declared hosts, behind the
egress proxy and the compiled relay, and again with the ``relay.py`` fallback; in a skill's
view, with only its programs and read paths) ``--runs`` times after a warm-up and prints the
median and 90th percentile wall time per call, and the CPU time per call (this process and its
children), each also as the difference to a bare ``subprocess.run``. ``--only`` (repeatable)
keeps the rows whose name contains one of the texts, and the bare row.
The workspace holds ``--files`` small files in a git repository, so the per-call walks
(git metadata, and as root the workspace grant) have something to walk. As root, the
bubblewrap rows are measured twice: with a root-owned workspace (a per-call ACL grant and
revoke) and with one owned by an ordinary user (the command runs as that user, nothing
granted). The files rows call the real ``files_read`` and ``files_search`` tools (path
checks, descriptor checks, RE2).
"""

from __future__ import annotations

import argparse
import os
import pwd
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sandbox.relay_build import RELAY_VARIABLE
from sandbox.runner import Grant, SandboxRunner
from sandbox.settings import SandboxSettings
from skills.context import SkillContext
from skills.files import make_files_tools

ARGV = ["bash", "-c", "true"]


def _cpu() -> float:
    """CPU seconds used so far by this process and its finished children."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def measure(fn: Callable[[], object], runs: int) -> tuple[float, float, float]:
    """Median and p90 wall seconds per call, and mean CPU seconds per call.

    On a busy machine wall time mostly measures the wait for a core; CPU time is what the
    call itself costs, and changes far less with the load.
    """
    for _ in range(3):
        fn()
    times = []
    cpu_began = _cpu()
    for _ in range(runs):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    cpu = (_cpu() - cpu_began) / runs
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))], cpu


def _workspace(root: Path, files: int, owner: int | None) -> Path:
    ws = root / ("ws-user" if owner is not None else "ws")
    (ws / "src").mkdir(parents=True)
    (ws / "README.md").write_text("# a project\n" * 40)
    for i in range(files):
        (ws / "src" / f"m{i}.py").write_text(f"x = {i}\n")
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    if owner is not None:
        for dirpath, dirnames, filenames in os.walk(ws):
            for name in [*dirnames, *filenames]:
                os.lchown(os.path.join(dirpath, name), owner, owner)
        os.chown(ws, owner, owner)
    return ws


def _with_relay_py(runner: SandboxRunner) -> object:
    """One call with the relay that needs no compiler (``relay.py`` under python3)."""
    os.environ[RELAY_VARIABLE] = "python"
    try:
        return runner.run(ARGV)
    finally:
        del os.environ[RELAY_VARIABLE]


def _kept(name: str, only: list[str]) -> bool:
    return name == "bare subprocess.run" or not only or any(t in name for t in only)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--only", action="append", default=[], help="rows whose name has this")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        ws = _workspace(Path(tmp), args.files, None)
        bwrap = SandboxRunner(SandboxSettings(), ws)
        bwrap.check()
        off = SandboxRunner(SandboxSettings(backend="off"), ws)
        # A skill that declares hosts: the filtering proxy and the relay inside the sandbox.
        hosts = SandboxRunner(
            SandboxSettings(), ws, grant=Grant(network=["example.com", "127.0.0.1"])
        )
        # A skill that declares its programs and read paths: a view of just those.
        view = SandboxRunner(
            SandboxSettings(), ws, grant=Grant(programs=["cat"], read_paths=["src/**"])
        )
        rows: list[tuple[str, Callable[[], object]]] = [
            ("bare subprocess.run", lambda: subprocess.run(ARGV, cwd=ws, capture_output=True)),
            ("runner, backend off", lambda: off.run(ARGV)),
            ("runner, bubblewrap", lambda: bwrap.run(ARGV)),
            ("  with declared hosts (proxy, relay.c)", lambda: hosts.run(ARGV)),
            ("  with declared hosts, relay.py", lambda: _with_relay_py(hosts)),
            ("  a skill's program view (bash, cat)", lambda: view.run(ARGV)),
        ]
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody").pw_uid
            owned = SandboxRunner(SandboxSettings(), _workspace(Path(tmp), args.files, nobody))
            rows.append(("  ws owned by a user", lambda: owned.run(ARGV)))
        tools = {t.name: t for t in make_files_tools(SkillContext.create(ws))}
        read, search = tools["files_read"], tools["files_search"]
        rows += [
            ("files_read tool", lambda: read.call({"path": "README.md"})),
            ("files_search tool", lambda: search.call({"pattern": r"x = 1\d$|project"})),
        ]
        kept = [(n, f) for n, f in rows if _kept(n, args.only)]
        results = {name: measure(fn, args.runs) for name, fn in kept}
    bare, _, bare_cpu = results["bare subprocess.run"]
    load = os.getloadavg()[0]
    head = f"per call ({args.runs} runs, {args.files} files, load {load:.2f})"
    print(f"{head:<44}{'median':>9}{'p90':>9}{'added':>9}{'cpu':>9}{'added':>9}")
    for name, (median, p90, cpu) in results.items():
        files = name.startswith("files")
        added = "--" if files else f"{(median - bare) * 1e3:.1f}ms"
        added_cpu = "--" if files else f"{(cpu - bare_cpu) * 1e3:.1f}ms"
        print(
            f"{name:<44}{median * 1e3:>7.1f}ms{p90 * 1e3:>7.1f}ms{added:>9}"
            f"{cpu * 1e3:>7.1f}ms{added_cpu:>9}"
        )


if __name__ == "__main__":
    main()
