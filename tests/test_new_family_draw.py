"""`bench/new_family.py draw` writes a suite of fresh tasks: the count asked of each family,
no prompt twice, and none of the prompts of the suite it is told to avoid."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from cli.evals.suite import load_suite

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ["count-chars", "json-keys"]


def draw(out: Path, seed: int, *avoid: Path) -> None:
    args = [sys.executable, str(ROOT / "bench" / "new_family.py"), "draw", "--count", "4"]
    args += [a for f in FAMILIES for a in ("--family", f)]
    args += ["--seed", str(seed), "--out", str(out)]
    args += [a for path in avoid for a in ("--avoid", str(path))]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CLAWLOOP_CONFIG": os.devnull}
    subprocess.run(args, check=True, env=env, capture_output=True, text=True)


def test_a_drawn_suite_has_its_count_of_each_family_and_none_of_the_avoided_prompts(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    draw(first, 777)
    draw(second, 777, first)  # the same seed: only --avoid keeps them apart
    tasks = load_suite(second).tasks
    assert Counter(t.id.split(".")[0] for t in tasks) == {f: 4 for f in FAMILIES}
    prompts = [t.prompt.strip().lower() for t in tasks]
    assert len(set(prompts)) == len(prompts)
    assert not set(prompts) & {t.prompt.strip().lower() for t in load_suite(first).tasks}


def test_several_suites_can_be_avoided_at_once(tmp_path: Path) -> None:
    first, second, third = (tmp_path / f"{n}.yaml" for n in ("first", "second", "third"))
    draw(first, 777)
    draw(second, 777, first)
    draw(third, 777, first, second)  # the ids of the two avoided suites overlap
    prompts = {t.prompt.strip().lower() for t in load_suite(third).tasks}
    for held in (first, second):
        assert not prompts & {t.prompt.strip().lower() for t in load_suite(held).tasks}
