"""The family split, from the generators' side: no generator makes a held-out family's task or
an evals/unseen.yaml prompt, and the curriculum refuses a held-out family by name."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from agent.errors import UserError
from cli.evals.generators.catalogue import catalogue, held_out_families
from cli.evals.generators.curriculum import generate
from cli.evals.generators.families import FAMILIES
from cli.evals.suite import load_suite

ROOT = Path(__file__).resolve().parents[2]
DRAWS = 30
NAMES = [family.name for family in catalogue()]
HELD_OUT = held_out_families()
TRAINABLE = set(NAMES) - HELD_OUT
UNSEEN_PROMPTS = {
    task.prompt.strip().lower() for task in load_suite(ROOT / "evals" / "unseen.yaml").tasks
}


def test_catalogue_names_are_unique_and_some_are_held_out() -> None:
    assert len(NAMES) == len(set(NAMES))
    assert HELD_OUT.issubset(NAMES) and HELD_OUT and TRAINABLE


@pytest.mark.parametrize("family", list(FAMILIES))
def test_generator_is_a_trainable_catalogue_family(family: str) -> None:
    assert family in NAMES, f"{family} is not in cli/evals/generators/catalogue.yaml"
    assert family not in HELD_OUT, f"{family} is held out for evals/unseen.yaml"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_generated_tasks_stay_out_of_the_unseen_suite(family: str) -> None:
    rng = random.Random(f"split-{family}")
    for _ in range(DRAWS):
        made = FAMILIES[family](rng)
        assert made.family in TRAINABLE, f"{family} made a task of family {made.family!r}"
        assert made.prompt.strip().lower() not in UNSEEN_PROMPTS, made.prompt


@pytest.mark.parametrize("family", sorted(HELD_OUT))
def test_curriculum_refuses_a_held_out_family(family: str) -> None:
    with pytest.raises(UserError, match=f"^{family} is held out for evals/unseen.yaml"):
        generate(1, families=[family])


def test_curriculum_still_generates_trainable_families() -> None:
    made = generate(len(FAMILIES), seed=5)
    assert {gold.family for _, gold in made.items} <= TRAINABLE
