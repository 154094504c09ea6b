"""`agent run` end to end, as a user runs it: a fresh process per run, and where its time goes.

The task (default: "how many lines are in README.md?" in a fresh folder holding a 3-line
README.md) takes two model calls: a tool call, then the answer. Each run is a new
``agent run --json`` process; the first starts with an empty cache folder (no weight cache, no
prefix cache on disk), the later ones with what the earlier runs left there, as a user's second
run does. Per run it reports the wall time and how it splits:

- start-up and exit: the wall time outside the agent loop (imports, loading the model, the
  interpreter's exit);
- per model call: time to first token (prefill, including the prompt's cached part) and the rest
  of the call (decoding), with the prompt and cached token counts.

The engine runs as `agent run` runs it by default: the first run starts the resident engine
(``keep_alive``, see ``backends/engine/resident``) and the later ones send their prompts to it;
``--keep-alive 0`` loads the engine in every run's own process instead. The resident engine is
stopped at the end.

    python bench/agent_run.py                      # the bundled engine, 3 runs
    python bench/agent_run.py --keep-alive 0       # the engine loaded in each run's process
    python bench/agent_run.py --backend llamacpp   # the embedded default, for comparison
    python bench/agent_run.py --speculate 0        # the engine without drafted tokens
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASK = "how many lines are in README.md?"


def one_run(backend: str, task: str, workspace: Path, env: dict[str, str]) -> dict[str, object]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "run", "-b", backend, "--json", task],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    steps = [e for e in events if e.get("type") == "step"]
    usage = next((e for e in events if e.get("type") == "usage"), {})
    final = next((e for e in events if e.get("type") == "final"), None)
    if done.returncode != 0 or final is None:
        raise SystemExit(f"agent run failed ({done.returncode}): {done.stderr[-800:]}")
    loop = float(usage.get("seconds", 0.0))
    return {
        "wall": wall,
        "outside_loop": wall - loop,
        "loop": loop,
        "answer": final["content"],
        "steps": [
            {
                "ttft": float(s.get("ttft_s") or 0.0),
                "rest": float(s["seconds"]) - float(s.get("ttft_s") or 0.0),
                "prompt": s["prompt_tokens"],
                "cached": s["cached_tokens"],
                "generated": s["completion_tokens"],
            }
            for s in steps
        ],
    }


def scratch(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A workspace in ``tmp`` holding a 3-line README.md, and an environment for ``agent``
    whose cache, data and config are in ``tmp`` too (the config file is not written)."""
    workspace = tmp / "work"
    workspace.mkdir()
    (workspace / "README.md").write_text("line one\nline two\nline three\n")
    env = dict(os.environ)
    env.update(
        CLAWLOOP_CACHE_DIR=str(tmp / "cache"),
        CLAWLOOP_DATA_DIR=str(tmp / "data"),
        CLAWLOOP_CONFIG=str(tmp / "config.toml"),
        PYTHONPATH=str(Path(__file__).resolve().parent.parent),
    )
    return workspace, env


def stop_engine(env: dict[str, str]) -> None:
    """Stop the resident engine hosts this environment's cache folder holds."""
    subprocess.run(
        [sys.executable, "-m", "cli.main", "engine", "stop"],
        env=env,
        capture_output=True,
        check=False,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="engine")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--task", default=TASK)
    parser.add_argument("--keep-alive", type=int, default=None, help="engine keep_alive, s")
    parser.add_argument(
        "--speculate", type=int, default=None, help="engine num_speculative_tokens (unset: its own)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workspace, env = scratch(Path(tmp))
        settings = {"keep_alive": args.keep_alive, "num_speculative_tokens": args.speculate}
        lines = [f"{key} = {value}\n" for key, value in settings.items() if value is not None]
        if lines:
            (Path(tmp) / "config.toml").write_text("[backends.engine]\n" + "".join(lines))
        one, five, _ = os.getloadavg()
        print(f"backend {args.backend}; task {args.task!r}; load average {one:.1f}/{five:.1f}")
        print("| run | wall s | outside loop s | call: ttft s + rest s (prompt/cached/generated) |")
        print("|---|---|---|---|")
        for index in range(args.runs):
            row = one_run(args.backend, args.task, workspace, env)
            calls = "; ".join(
                f"{s['ttft']:.2f} + {s['rest']:.2f} ({s['prompt']}/{s['cached']}/{s['generated']})"
                for s in row["steps"]  # type: ignore[attr-defined]
            )
            label = "first (empty cache)" if index == 0 else str(index + 1)
            print(f"| {label} | {row['wall']:.2f} | {row['outside_loop']:.2f} | {calls} |")
        one, five, _ = os.getloadavg()
        print(f"answer: {row['answer']!r}; load average at the end {one:.1f}/{five:.1f}")
        if args.backend == "engine":
            stop_engine(env)


if __name__ == "__main__":
    main()
