"""The vocabulary generators draw names and contents from."""

from __future__ import annotations

import random

STEMS = (
    "notes",
    "todo",
    "plan",
    "diary",
    "agenda",
    "ideas",
    "tasks",
    "recipes",
    "guests",
    "songs",
    "budget",
    "inventory",
    "errands",
    "journal",
    "minutes",
    "memo",
    "draft",
    "summary",
    "list",
    "report",
    "letter",
    "outline",
    "log",
    "events",
    "books",
    "movies",
    "cities",
    "colors",
)
WORDS = (
    "apple",
    "river",
    "stone",
    "lamp",
    "garden",
    "window",
    "cloud",
    "pencil",
    "harbor",
    "violin",
    "ticket",
    "candle",
    "meadow",
    "rocket",
    "basket",
    "forest",
    "mirror",
    "wallet",
    "saddle",
    "lantern",
    "pepper",
    "copper",
    "falcon",
    "marble",
    "orchid",
    "tunnel",
    "velvet",
    "walnut",
    "anchor",
    "bridge",
    "cactus",
    "dragon",
    "engine",
    "ferry",
    "glacier",
    "hammer",
    "island",
)
NAMES = (
    "ada",
    "ben",
    "cleo",
    "dan",
    "eva",
    "finn",
    "gia",
    "hugo",
    "iris",
    "jon",
    "kira",
    "leo",
    "mona",
    "nils",
    "olga",
    "pia",
    "quin",
    "rosa",
    "sven",
    "tara",
    "uma",
    "vic",
    "wes",
    "yara",
)
EXTENSIONS = (".txt", ".md", ".log", ".csv")


def stem(rng: random.Random, avoid: set[str] | None = None) -> str:
    """A file stem not in ``avoid`` (which it is added to)."""
    taken = avoid if avoid is not None else set()
    choice = rng.choice([s for s in STEMS if s not in taken])
    taken.add(choice)
    return choice


def lines(rng: random.Random, n: int) -> str:
    """``n`` short lines of words, each ending in a newline."""
    return "".join(" ".join(rng.sample(WORDS, rng.randint(1, 4))) + "\n" for _ in range(n))
