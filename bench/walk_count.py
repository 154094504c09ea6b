"""Count the product files a message really walks through, by running it under a profiler.

``python bench/walk_count.py telegram``: `agent gateway` as a child process, with a scripted
fake model, the real sandbox and the local Telegram Bot API server of the tests. An owner's
message makes the model call the shell (allowed by a rule, so nobody is asked); the command
runs in bubblewrap; the answer goes back to the chat. Counted: the product files (under
agent/, backends/, skills/, sandbox/, connectors/, cli/) with a Python function called between
the message's arrival and the answer, and those with any code run in the whole process.

``python bench/walk_count.py run [--backend llamacpp]``: `agent run` for one model call
(``--max-steps 1``, a task the model answers in words), the whole process counted.

How: a ``sitecustomize`` module put first on the child's PYTHONPATH installs
``sys.setprofile`` and ``threading.setprofile``, noting the file of every Python function
called (module bodies included: an import runs one); SIGUSR1 opens and closes the message's
window. The files of the checkout that ``agent`` is imported from are counted, so the same
script measures another checkout: ``PYTHONPATH=/path/to/other python bench/walk_count.py``.
Repeated runs give the same counts: they depend on the code, not on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PACKAGES = ("agent", "backends", "skills", "sandbox", "connectors", "cli")
OWNER = 111

PROFILER = """
import atexit, json, os, signal, sys, threading
_all, _window, _on = set(), set(), [False]
def _note(frame, event, arg):
    if event == "call":
        name = frame.f_code.co_filename
        _all.add(name)
        if _on[0]:
            _window.add(name)
def _toggle(*_):
    _on[0] = not _on[0]
signal.signal(signal.SIGUSR1, _toggle)
sys.setprofile(_note)
threading.setprofile(_note)
@atexit.register
def _dump():
    sys.setprofile(None)
    with open(os.environ["WALK_OUT"], "w") as f:
        json.dump({"all": sorted(_all), "window": sorted(_window)}, f)
"""


def product_files(names: list[str], root: Path) -> list[str]:
    """The files of the six packages under ``root``, relative to it."""
    found = set()
    for name in names:
        path = Path(name)
        if path.is_absolute() and path.is_relative_to(root):
            rel = path.relative_to(root)
            if rel.parts and rel.parts[0] in PACKAGES:
                found.add(str(rel))
    return sorted(found)


def checkout() -> Path:
    """The checkout ``agent`` is imported from (PYTHONPATH first, else this one)."""
    import agent

    return Path(agent.__file__).resolve().parent.parent


def child_env(root: Path, work: Path, extra: dict[str, str]) -> dict[str, str]:
    (work / "profiler").mkdir(exist_ok=True)
    (work / "profiler" / "sitecustomize.py").write_text(PROFILER)
    env = dict(os.environ)
    env.update(
        PYTHONPATH=f"{work / 'profiler'}{os.pathsep}{root}",
        WALK_OUT=str(work / "walk.json"),
        CLAWLOOP_CONFIG=str(work / "config.toml"),
        CLAWLOOP_DATA_DIR=str(work / "data"),
        **extra,
    )
    return env


def walk_telegram(root: Path, work: Path) -> dict[str, list[str]]:
    """One Telegram message to a sandboxed command and back, through `agent gateway`."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "connectors"))
    from fake_telegram import TOKEN, FakeTelegram
    from loopthread import LoopThread, wait_for

    ws = work / "ws"
    ws.mkdir()
    lt = LoopThread()
    fake = FakeTelegram()
    lt.run(fake.start())
    script = work / "script.json"
    call = {"tool_calls": [{"name": "shell", "arguments": {"command": "echo walked"}}]}
    script.write_text(json.dumps([call, "done"]))
    (work / "config.toml").write_text(
        f'backend = "fake"\nworkspace = "{ws}"\n\n'
        f'[backends.fake]\nscript = "{script}"\n\n'
        '[sandbox]\nallow = ["shell(echo *)"]\n\n'
        f'[connectors.telegram]\nenabled = true\nbase_url = "{fake.base_url}"\n'
        f"owner_ids = [{OWNER}]\npoll_timeout = 1\n"
    )
    env = child_env(root, work, {"CLAWLOOP_TELEGRAM_TOKEN": TOKEN})
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "gateway"],
        env=env,
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(8)  # connected and polling (the first poll's answer is empty)
        proc.send_signal(signal.SIGUSR1)
        fake.say(OWNER, OWNER, "say walked")
        wait_for(lambda: "done" in [s.text for s in fake.replies(OWNER)], 120, "the answer")
        proc.send_signal(signal.SIGUSR1)
        # The turn's thread ends just after the answer is sent; a gateway stopped while one is
        # still alive exits at once (os._exit), before the profiler's atexit can write its file.
        time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    finally:
        proc.kill()
        lt.run(fake.stop())
        lt.close()
    return json.loads((work / "walk.json").read_text())


def walk_run(root: Path, work: Path, backend: str) -> dict[str, list[str]]:
    """`agent run` for one model call, the whole process counted."""
    ws = work / "ws"
    ws.mkdir()
    (work / "config.toml").write_text(f'backend = "{backend}"\nworkspace = "{ws}"\n')
    env = child_env(root, work, {})
    args = ["run", "--max-steps", "1", "--yes", "Say hello in one word."]
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if not (work / "walk.json").exists():
        raise SystemExit(f"agent run failed ({done.returncode}): {done.stderr[-2000:]}")
    walk: dict[str, list[str]] = json.loads((work / "walk.json").read_text())
    walk["window"] = walk["all"]
    return walk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("walk", choices=["telegram", "run"])
    parser.add_argument("--backend", default="llamacpp", help="for `run` (default: llamacpp)")
    parser.add_argument("--list", action="store_true", help="print the files too")
    args = parser.parse_args()
    root = checkout()
    with tempfile.TemporaryDirectory(prefix="clawloop-walk-") as tmp:
        work = Path(tmp)
        if args.walk == "telegram":
            walk = walk_telegram(root, work)
        else:
            walk = walk_run(root, work, args.backend)
    window = product_files(walk["window"], root)
    whole = product_files(walk["all"], root)
    by_package = {p: sum(f.startswith(p + "/") for f in window) for p in PACKAGES}
    print(
        json.dumps(
            {
                "checkout": str(root),
                "walk": args.walk,
                "during": len(window),
                "by_package": by_package,
                "whole_process": len(whole),
            }
        )
    )
    if args.list:
        print("\n".join(window))


if __name__ == "__main__":
    main()
