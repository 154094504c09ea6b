"""A curriculum: fresh generated tasks across families, none of them a held-out suite's task."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from agent.errors import UserError
from cli.evals.generators.base import Generated
from cli.evals.generators.catalogue import held_out_families
from cli.evals.generators.families import FAMILIES
from cli.evals.suite import Suite, Task
from skills.simple_command import COMMAND_TOOL

MAX_TRIES = 50


@dataclass(slots=True)
class Curriculum:
    """Generated tasks with their gold solutions, in the order they were made."""

    items: list[tuple[Task, Generated]]

    def suite(self, name: str = "curriculum") -> Suite:
        """The tasks as a suite, for ``agent eval`` and rejection sampling."""
        return Suite(name=name, tasks=[task for task, _ in self.items])

    def gold(self, task_id: str) -> Generated:
        """The gold solution of a task."""
        return next(g for t, g in self.items if t.id == task_id)


def needs_command(family: str) -> bool:
    """Whether the family's gold solutions are ``run_command`` lines (no family mixes)."""
    made = FAMILIES[family](random.Random(0))
    return any(c.name == COMMAND_TOOL for c in made.calls)


def trainable(families: Iterable[str] | None, command_tool: bool) -> list[str]:
    """The families a training run draws from, given whether ``run_command`` is offered.

    Without it (``[small] command_tool = false``) a family solved by a ``run_command`` line
    cannot be trained: all of them are left out by default, and naming one is refused.
    """
    chosen = list(families) if families is not None else list(FAMILIES)
    if command_tool:
        return chosen
    named = families is not None
    needing = [f for f in chosen if f in FAMILIES and needs_command(f)]
    if named and needing:
        raise UserError(
            f"family {needing[0]} is solved with run_command, which this configuration does "
            "not offer: set `command_tool = true` under [small] in the config, or `recipes = "
            "true` to solve it with command recipes"
        )
    return [f for f in chosen if f not in needing]


def _key(prompt: str, files: dict[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    return prompt.strip().lower(), tuple(sorted(files.items()))


def generate(
    count: int,
    seed: int = 0,
    families: Iterable[str] | None = None,
    held_out: Iterable[Task] = (),
) -> Curriculum:
    """``count`` tasks, round-robin over ``families`` (all by default), reproducible by ``seed``.

    A task with a held-out task's prompt is drawn again, so the curriculum never holds the
    tasks it is measured on. Repeats among generated tasks are allowed (greetings are few).
    """
    chosen = list(families) if families is not None else list(FAMILIES)
    held = [f for f in chosen if f in held_out_families()]
    if held:
        # Training on a held-out family would void what evals/unseen.yaml measures.
        raise UserError(f"{held[0]} is held out for evals/unseen.yaml and is never generated")
    unknown = [f for f in chosen if f not in FAMILIES]
    if unknown or not chosen:
        raise UserError(
            f"unknown task family {', '.join(unknown) or '(none)'}: "
            f"choose from {', '.join(FAMILIES)}"
        )
    rng = random.Random(seed)
    seen = {_key(t.prompt, t.files) for t in held_out}
    held_prompts = {t.prompt.strip().lower() for t in held_out}
    items: list[tuple[Task, Generated]] = []
    for index in range(count):
        family = chosen[index % len(chosen)]
        for _ in range(MAX_TRIES):
            made = FAMILIES[family](rng)
            key = _key(made.prompt, made.files)
            # A task sharing a held-out prompt is too close, even with other files.
            if key not in seen and key[0] not in held_prompts:
                break
        else:
            raise UserError(f"family {family} made no new task in {MAX_TRIES} tries: use fewer")
        items.append((made.task(f"gen-{family}-{index:04d}"), made))
    return Curriculum(items)
