"""What a generator makes: a task in the suite format and the scripted solution that passes it."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cli.evals.suite import Check, Task


@dataclass(slots=True)
class GoldCall:
    """One call of the ``simple`` skill's tools that the solution makes."""

    name: str
    arguments: dict[str, Any]


@dataclass(slots=True)
class Generated:
    """A fresh task, the calls that solve it, and the answer to give at the end."""

    family: str
    prompt: str
    files: dict[str, str]
    check: Check
    calls: list[GoldCall] = field(default_factory=list)
    answer: str = "Done."

    def task(self, task_id: str) -> Task:
        """The task in the suite format."""
        return Task(
            id=task_id, prompt=self.prompt, files=self.files, family=self.family, check=self.check
        )


Generator = Callable[[random.Random], Generated]


def call(name: str, **arguments: Any) -> GoldCall:
    """A gold call, written like a function call."""
    return GoldCall(name, arguments)


def pick(rng: random.Random, *options: str) -> str:
    """One phrasing of several."""
    return rng.choice(options)
