"""Teaching the agent new task families through the flywheel, measured on fresh instances.

    python bench/new_family.py screen --family F ... [--count 5]
    python bench/new_family.py draw --family F ... --count 5 --seed 777 \\
        --avoid S.yaml [--avoid T.yaml ...] --out X.yaml
    python bench/new_family.py teach --family F1 --family F2 --family F3 \\
        [--train 30] [--fresh 20] [--by teacher|search] [--out new-family/]

`screen` runs a few fresh tasks of each family with the current adapter, to find families the
agent fails. `draw` writes a suite of fresh tasks (``--count`` of each family, no two with one
prompt, none sharing a prompt with ``--avoid``): a figure no choice was tuned on. `teach` is the
whole demonstration, each step a real `agent` command:

1. two suites are drawn from the generators: `train.yaml` (``--train`` tasks per family) and
   `fresh.yaml` (``--fresh`` other tasks per family: other files, names, values and wording);
2. `agent eval fresh.yaml` with the current adapter: the figure before;
3. `agent train --teacher openai --teacher-suite train.yaml`: a teacher on 127.0.0.1 attempts
   each training task once through the real loop, skills and sandbox; the runs its check
   passes become examples, and a LoRA is trained from the current adapter. **The teacher here
   is scripted**: it answers each request with the next call of the generator's gold solution
   for that prompt, standing in for a stronger model (a GPU box or an API); it sees exactly the
   requests the embedded model is sent;
4. `agent eval fresh.yaml` and `agent eval evals/basic.yaml` with the new adapter: the figures
   after, and what the rest of the agent lost.

With ``--by search`` there is no teacher: step 3 is the loop a user runs by hand. The agent
attempts the training tasks (`agent eval train.yaml`), every failed run is corrected by
searching the tools its request offered (`agent traces fix --failed --search`), and the
graded-good traces, its own passing runs and the fixes, train the adapter (`agent train
--from-traces`). Those traces have a data folder of their own, apart from the fresh evals'.

``--replay N`` adds the gold runs of N generated tasks of the basic suite's own families to the
same training round (`replay.jsonl`, passed with `--data`), so that the families the adapter
already knows are rehearsed beside the new ones. The new families get no extra examples.

The agent's own configuration is used (set `CLAWLOOP_CONFIG` to choose one); results and logs
go to ``--out``. Nothing is downloaded; every server is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scripted_openai import completion, scripted_server  # noqa: E402
from cli.evals.generators.base import Generated  # noqa: E402
from cli.evals.generators.curriculum import generate  # noqa: E402
from cli.evals.generators.gold import gold_turns  # noqa: E402
from cli.evals.stats import wilson  # noqa: E402
from cli.evals.suite import Task, load_suite  # noqa: E402

FRESH_SEED = 90210
TRAIN_SEED = 31337
REPLAY_SEED = 4242
SPARE = 3  # tasks drawn beyond --count per family, for the repeated prompts `draw` drops
SHIPPED = ROOT / "backends" / "adapters" / "smollm2-135m-clawloop.gguf"


def _suite_yaml(name: str, items: list[tuple[str, Generated]]) -> str:
    tasks = []
    for task_id, made in items:
        task = made.task(task_id).model_dump(exclude_defaults=True)
        task["check"] = made.check.model_dump(exclude_defaults=True)
        tasks.append(task)
    return yaml.safe_dump({"name": name, "tasks": tasks}, sort_keys=False, allow_unicode=True)


def draw(families: list[str], per_family: int, seed: int, held: list[Task]) -> list[Any]:
    """``per_family`` fresh tasks of each family, none sharing a prompt and files with ``held``."""
    made = generate(per_family * len(families), seed, families, held)
    return made.items


def _unique_prompts(items: list[Any], per_family: int) -> list[Any]:
    """At most ``per_family`` tasks of each family, no two with the same prompt."""
    seen: set[str] = set()
    counts: dict[str, int] = {}
    kept = []
    for task, made in items:
        key = made.prompt.strip()
        if key in seen or counts.get(made.family, 0) >= per_family:
            continue
        seen.add(key)
        counts[made.family] = counts.get(made.family, 0) + 1
        kept.append((task, made))
    return kept


def write_suite(path: Path, name: str, items: list[Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    named = [(f"{g.family}.{i:03d}", g) for i, (_, g) in enumerate(items)]
    path.write_text(_suite_yaml(name, named), encoding="utf-8")


def agent(*args: str, log: Path, data: Path | None = None) -> subprocess.CompletedProcess[str]:
    """One `agent` command; its stderr goes to ``log``, its traces to ``data`` (default: the
    log's folder's ``data``)."""
    command = [sys.executable, "-m", "cli.main", *args]
    folder = data if data is not None else log.parent / "data"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CLAWLOOP_DATA_DIR": str(folder)}
    with log.open("a", encoding="utf-8") as err:
        err.write(f"$ agent {' '.join(args)}\n")
        err.flush()
        done = subprocess.run(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err, text=True, check=False
        )
    if done.returncode != 0:
        raise SystemExit(f"agent {' '.join(args)} failed ({done.returncode}): see {log}")
    return done


def evaluate(suite: Path, adapter: str, out: Path, label: str) -> dict[str, Any]:
    """`agent eval SUITE --json` with ``adapter``: pass counts overall and per family."""
    started = time.monotonic()
    done = agent("eval", str(suite), "--adapter", adapter, "--json", log=out / "log.txt")
    data = json.loads(done.stdout)
    (out / f"{label}.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    tasks = data["variants"][0]["tasks"]
    per: dict[str, list[int]] = {}
    for t in tasks:
        tally = per.setdefault(t["task"].split(".")[0], [0, 0])
        tally[0] += bool(t["passed"])
        tally[1] += 1
    passed = sum(p for p, _ in per.values())
    return {
        "label": label,
        "passed": passed,
        "tasks": len(tasks),
        "interval": wilson(passed, len(tasks)),
        "per_family": per,
        "seconds": round(time.monotonic() - started),
    }


def _evaluate_all(runs: list[tuple[Path, str, str]], out: Path) -> list[dict[str, Any]]:
    """The evals of ``runs`` (suite, adapter, label), two at a time, printed as they end."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [
            pool.submit(evaluate, suite, adapter, out, label) for suite, adapter, label in runs
        ]
        results = [f.result() for f in futures]
    for result in results:
        print(_line(result), flush=True)
    return results


def _reply(body: dict[str, Any], answers: dict[str, Generated]) -> dict[str, Any]:
    messages = body["messages"]
    user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    gold = answers.get(messages[user]["content"].strip())
    done = sum(m["role"] == "assistant" for m in messages[user + 1 :])
    if gold is None:
        return completion({"role": "assistant", "content": "I do not know this task."})
    turn = gold_turns(gold)[min(done, len(gold.calls))]
    return completion({"role": "assistant", **turn.to_wire()})


@contextmanager
def scripted_teacher(items: list[Any]) -> Iterator[str]:
    """A teacher on 127.0.0.1 that replays each task's gold solution, known by its prompt."""
    answers = {g.prompt.strip(): g for _, g in items}
    with scripted_server(lambda body: _reply(body, answers)) as (url, _):
        yield url


def _line(result: dict[str, Any]) -> str:
    low, high = result["interval"]
    per = result["per_family"]
    # Generated suites' ids are FAMILY.NNN; other suites' (basic.yaml) name no family.
    families = ", ".join(f"{f} {p}/{n}" for f, (p, n) in sorted(per.items()) if n > 1)
    return (
        f"{result['label']:<22} {result['passed']:>3}/{result['tasks']:<3} "
        f"({100 * low:.1f}-{100 * high:.1f}%)  {families}  [{result['seconds']} s]"
    )


def screen(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    basic = load_suite(ROOT / "evals" / "basic.yaml")
    items = draw(args.family, args.count, FRESH_SEED + 1, list(basic.tasks))
    write_suite(out / "screen.yaml", "screen", items)
    print(_line(evaluate(out / "screen.yaml", args.adapter, out, "screen")))


def replay(count: int, held: list[Task], out: Path) -> Path:
    """Gold runs of ``count`` generated tasks of the basic families, as a `--data` file."""
    from rich.console import Console

    from cli.evals.generators.curriculum import trainable
    from cli.evals.generators.families import BASIC_FAMILIES
    from cli.train_sources import gold_examples

    families = trainable(list(BASIC_FAMILIES), command_tool=False)
    made = generate(count, REPLAY_SEED, families, held)
    folder = out / "replay"
    folder.mkdir(parents=True, exist_ok=True)
    gold_examples(Console(stderr=True), made, folder)
    return folder / "curriculum.jsonl"


def teach(args: argparse.Namespace) -> None:
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    basic = load_suite(ROOT / "evals" / "basic.yaml")
    fresh = draw(args.family, args.fresh, FRESH_SEED, list(basic.tasks))
    write_suite(out / "fresh.yaml", "fresh", fresh)
    fresh_suite = load_suite(out / "fresh.yaml")
    held = [*basic.tasks, *fresh_suite.tasks]
    # The scripted teacher knows a task by its prompt: training prompts are kept unique.
    train = _unique_prompts(draw(args.family, 2 * args.train, TRAIN_SEED, held), args.train)
    write_suite(out / "train.yaml", "train", train)
    print(f"families: {', '.join(args.family)}; {len(train)} training tasks, {len(fresh)} fresh")
    basic_path = ROOT / "evals" / "basic.yaml"
    # Two evals at once: each is one process on one llama.cpp thread.
    before = [] if args.no_before else [(out / "fresh.yaml", args.adapter, "fresh, before")]
    if args.basic_before:
        before.append((basic_path, args.adapter, "basic, before"))
    results = _evaluate_all(before, out)
    started = time.monotonic()
    extra = ["--data", str(replay(args.replay, held, out))] if args.replay else []
    settings = ("--start-from", args.adapter, "--epochs", str(args.epochs), "--lr", str(args.lr))
    if args.by == "search":
        taught = _taught_by_search(args, out, extra, settings)
    else:
        with scripted_teacher(train) as url:
            agent(
                *("train", "--teacher", "openai", "--base-url", url, *extra),
                *("--teacher-suite", str(out / "train.yaml"), *settings),
                *("--out", str(out / "round")),
                log=out / "log.txt",
            )
        taught = json.loads((out / "round" / "manifest.json").read_text())["data"]["teacher"]
        print(f"teacher: {taught['passed']}/{taught['tasks']} runs passed")
    trained = round(time.monotonic() - started)
    manifest = json.loads((out / "round" / "manifest.json").read_text())
    print(f"trained in {trained} s, {manifest['data'].get('examples')} examples")
    adapter = str(out / "round" / "adapter.gguf")
    after = [(out / "fresh.yaml", adapter, "fresh, after"), (basic_path, adapter, "basic, after")]
    results += _evaluate_all(after, out)
    summary = {"families": args.family, "teacher": taught, "train_seconds": trained}
    summary["replay"] = manifest["data"].get("examples", 0) - taught.get("examples", 0)
    summary["results"] = results
    (out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")


def _taught_by_search(
    args: argparse.Namespace, out: Path, extra: list[str], settings: tuple[str, ...]
) -> dict[str, Any]:
    """The user's own loop, with no teacher and no hand-written turns: the agent attempts the
    training tasks (`agent eval`), every failed run is corrected by search (`agent traces fix
    --failed --search`), and the graded-good traces train the adapter (`--from-traces`). Its
    traces have a data folder of their own, apart from the fresh tasks' evals."""
    data = out / "teach-data"
    log = out / "log.txt"
    done = agent(
        "eval", str(out / "train.yaml"), "--adapter", args.adapter, "--json", log=log, data=data
    )
    passed = json.loads(done.stdout)["variants"][0]["passed"]
    fixed = agent("traces", "fix", "--failed", "--search", log=log, data=data).stdout
    print(f"the agent passed {passed} training tasks; {fixed.strip().splitlines()[-1]}")
    families = [x for f in args.family for x in ("--family", f)]
    agent(
        *("train", "--from-traces", *families, *extra, *settings, "--out", str(out / "round")),
        log=log,
        data=data,
    )
    return {"agent_passed": passed, "fixed": fixed.strip().splitlines()[-1]}


def draw_suite(args: argparse.Namespace) -> None:
    """``--count`` fresh tasks of each family, with distinct prompts, written to ``--out``."""
    held = [task for path in args.avoid or [] for task in load_suite(Path(path)).tasks]
    drawn = draw(args.family, args.count + SPARE, args.seed, held)
    items = _unique_prompts(drawn, args.count)
    write_suite(Path(args.out), Path(args.out).stem, items)
    print(f"{len(items)} tasks of {len(args.family)} families in {args.out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    for name in ("screen", "teach"):
        p = sub.add_parser(name)
        p.add_argument("--family", action="append", required=True)
        p.add_argument("--adapter", default=str(SHIPPED), help="the adapter to start from")
        p.add_argument("--out", default="new-family")
    sub.choices["screen"].add_argument("--count", type=int, default=5)
    draw_p = sub.add_parser("draw")
    draw_p.add_argument("--family", action="append", required=True)
    draw_p.add_argument("--count", type=int, default=5, help="tasks per family")
    draw_p.add_argument("--seed", type=int, default=FRESH_SEED)
    draw_p.add_argument(
        "--avoid", action="append", help="a suite whose prompts are not drawn; repeatable"
    )
    draw_p.add_argument("--out", required=True, help="the suite file to write")
    teach_p = sub.choices["teach"]
    teach_p.add_argument("--train", type=int, default=30, help="training tasks per family")
    teach_p.add_argument("--fresh", type=int, default=20, help="fresh tasks per family")
    teach_p.add_argument("--epochs", type=int, default=2)
    teach_p.add_argument("--lr", type=float, default=3e-4)
    teach_p.add_argument("--basic-before", action="store_true", help="also eval basic before")
    teach_p.add_argument("--no-before", action="store_true", help="skip the fresh tasks' before")
    teach_p.add_argument(
        "--replay", type=int, default=0, help="gold tasks of the basic families trained beside"
    )
    teach_p.add_argument(
        "--by",
        choices=("teacher", "search"),
        default="teacher",
        help="the right runs: a scripted teacher, or the agent's own runs fixed by search",
    )
    args = parser.parse_args()
    {"screen": screen, "draw": draw_suite, "teach": teach}[args.step](args)


if __name__ == "__main__":
    main()
