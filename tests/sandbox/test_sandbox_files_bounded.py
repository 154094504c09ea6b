"""The files tools are bounded: no write through a link out, no hang, no worker held.

The files tools run inside clawloop, not in bubblewrap, so their boundary is the code. Each
attempt sets up, on the host, what a sandboxed command could leave in the workspace (a hard
link to an outside file, a FIFO, a file that catastrophic backtracking chokes on, a name that
flips between a file and a link) and calls the tool through the real toolbox. The judge reads
the outside file and the clock. The controls do the same with a naive implementation.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import pytest

from agent.errors import ToolError
from agent.tools import Toolbox
from cli.approvals import AutoApprover
from sandbox.settings import ResourceLimits, SandboxSettings
from skills.context import SkillContext
from skills.toolbox import build_toolbox


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "outside.txt").write_text("outside, untouched\n")
    return ws


def _toolbox(ws: Path, timeout: float = 5) -> Toolbox:
    limits = ResourceLimits(timeout_s=timeout)
    context = SkillContext.create(ws, SandboxSettings(limits=limits))
    return build_toolbox(context, AutoApprover())


def _call(tb: Toolbox, name: str, **args: object) -> str:
    tool = tb.get(name)
    assert tool is not None
    return tool.call(args).render()


def _timed(fn, *args, **kwargs) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    began = time.monotonic()
    try:
        out: object = fn(*args, **kwargs)
    except ToolError as exc:
        out = exc
    return time.monotonic() - began, out


def outside(ws: Path) -> Path:
    return ws.parent / "outside.txt"


@pytest.mark.parametrize("tool", ["files_write", "files_edit"])
def test_a_hard_link_out_is_never_truncated_or_written(ws: Path, tool: str) -> None:
    os.link(outside(ws), ws / "hl.txt")
    args = (
        {"content": "pwned"} if tool == "files_write" else {"old_text": "outside", "new_text": "x"}
    )
    with pytest.raises(ToolError, match="hard links"):
        _call(_toolbox(ws), tool, path="hl.txt", **args)
    assert outside(ws).read_text() == "outside, untouched\n"


def test_a_name_flipping_between_a_file_and_a_hard_link_never_truncates(ws: Path) -> None:
    tb = _toolbox(ws)
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            for make in (
                lambda: (ws / "t.txt").write_text("mine\n"),
                lambda: os.link(outside(ws), ws / "t.txt"),
            ):
                try:
                    (ws / "t.txt").unlink(missing_ok=True)
                    make()
                except OSError:
                    pass

    thread = threading.Thread(target=flip, daemon=True)
    thread.start()
    try:
        for _ in range(300):
            with contextlib.suppress(ToolError):
                _call(tb, "files_write", path="t.txt", content="pwned")
    finally:
        stop.set()
        thread.join(5)
    assert outside(ws).read_text() == "outside, untouched\n"


def test_control_a_naive_write_through_the_link_truncates_outside(ws: Path) -> None:
    os.link(outside(ws), ws / "hl.txt")
    with open(ws / "hl.txt", "w") as fh:  # what a check-then-open(O_TRUNC) write does
        fh.write("")
    assert outside(ws).read_text() == ""


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("files_read", {"path": "fifo"}),
        ("files_edit", {"path": "fifo", "old_text": "a", "new_text": "b"}),
        ("files_write", {"path": "fifo", "content": "x"}),
        ("files_search", {"pattern": "x", "path": "."}),
        ("files_search", {"pattern": "x", "path": "fifo"}),
    ],
    ids=["read", "edit", "write", "search-folder", "search-fifo"],
)
def test_a_fifo_never_blocks(ws: Path, tool: str, args: dict[str, object]) -> None:
    os.mkfifo(ws / "fifo")
    (ws / "a.txt").write_text("x marks\n")
    seconds, out = _timed(_call, _toolbox(ws), tool, **args)
    assert seconds < 2, f"{tool} blocked for {seconds:.1f} s"
    if tool != "files_search" or args["path"] == "fifo":
        assert isinstance(out, ToolError) or "no matches" in str(out), out


def test_control_a_plain_open_of_the_fifo_blocks(ws: Path) -> None:
    os.mkfifo(ws / "fifo")
    opened = threading.Event()
    thread = threading.Thread(target=lambda: (open(ws / "fifo").close(), opened.set()), daemon=True)
    thread.start()
    time.sleep(0.5)
    assert not opened.is_set()  # the judge sees a hang where there is one
    with open(ws / "fifo", "w"):
        pass
    thread.join(2)


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a|aa)+$", "(a*)*b", "^(([a-z])+.)+[A-Z]([a-z])+$"])
def test_catastrophic_patterns_return_at_once(ws: Path, pattern: str) -> None:
    (ws / "evil.txt").write_text("a" * 5000 + "!\n")
    seconds, _ = _timed(_call, _toolbox(ws), "files_search", pattern=pattern)
    assert seconds < 2, f"{pattern} took {seconds:.1f} s"


def test_control_the_backtracking_engine_chokes(ws: Path) -> None:
    import re

    began = time.monotonic()
    re.search("(a+)+$", "a" * 24 + "!")
    assert time.monotonic() - began > 0.3  # the judge sees a slow search where there is one


def test_a_huge_tree_does_not_hold_a_worker_past_the_timeout(ws: Path) -> None:
    for i in range(60):
        sub = ws / f"d{i}"
        sub.mkdir()
        for j in range(400):
            (sub / f"f{j}.txt").write_text("needle\n" if j == 399 else "hay\n")
    tb = _toolbox(ws, timeout=0.3)
    seconds, out = _timed(_call, tb, "files_search", pattern="nothing-matches-this")
    assert seconds < 2 and "stopped after" in str(out), (seconds, out)
    seconds, out = _timed(_call, tb, "files_list", path=".", recursive=True)
    assert seconds < 2


@pytest.mark.parametrize(
    "path", [".git/config", "sub/.git", "sub/.git/hooks/pre-commit", ".bashrc", "x/.profile"]
)
def test_git_metadata_and_start_up_files_are_not_written(ws: Path, path: str) -> None:
    with pytest.raises(ToolError, match="protected"):
        _call(_toolbox(ws), "files_write", path=path, content="[core]\n\tfsmonitor = touch /x\n")
    assert not (ws / path).exists()


def test_links_to_devices_and_outside_are_refused(ws: Path) -> None:
    (ws / "zero").symlink_to("/dev/zero")
    (ws / "out").symlink_to(outside(ws))
    tb = _toolbox(ws)
    for path in ("zero", "out"):
        seconds, out = _timed(_call, tb, "files_read", path=path)
        assert isinstance(out, ToolError) and seconds < 2
    with pytest.raises(ToolError):
        _call(tb, "files_write", path="out", content="pwned")
    assert outside(ws).read_text() == "outside, untouched\n"


def test_files_still_work(ws: Path) -> None:
    tb = _toolbox(ws)
    _call(tb, "files_write", path="src/a.py", content="x = 1\n")
    _call(tb, "files_edit", path="src/a.py", old_text="x = 1", new_text="x = 2")
    assert _call(tb, "files_read", path="src/a.py") == "x = 2\n"
    assert "src/a.py:1: x = 2" in _call(tb, "files_search", pattern=r"x\s=\s\d")
