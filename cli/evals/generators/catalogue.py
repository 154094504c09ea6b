"""The catalogue of task families (catalogue.yaml), and which of them are held out of training."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True, slots=True)
class Family:
    """One kind of everyday task: its name, category, what it asks and how it is solved."""

    name: str
    category: str
    what: str
    how: str
    held_out: bool = False


@cache
def _load() -> tuple[Family, ...]:
    import yaml

    text = resources.files("cli.evals.generators").joinpath("catalogue.yaml").read_text("utf-8")
    # The catalogue ships with the package, so a malformed entry is a bug and propagates.
    return tuple(Family(**entry) for entry in yaml.safe_load(text)["families"])


def catalogue() -> list[Family]:
    """Every family, in the catalogue's order."""
    return list(_load())


def held_out_families() -> frozenset[str]:
    """The families measured by evals/unseen.yaml, which no generator may make."""
    return frozenset(f.name for f in _load() if f.held_out)
