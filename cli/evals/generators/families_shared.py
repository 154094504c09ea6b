"""Helpers shared by the read families' modules: the workspace vocabulary, file bodies, CSV
tables and the checks an answer is held to.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable

from cli.evals.generators.base import Generated, call
from cli.evals.generators.words import NAMES, WORDS, stem
from cli.evals.suite import Check

TEXT = (".txt", ".md", ".log")
FOLDERS = ("docs", "data", "src", "archive", "photos", "old", "backup", "music", "tests")
COLUMNS = ("price", "qty", "score", "age", "points", "sales", "weight", "hours", "visits")


def _word(text: str) -> str:
    return rf"\b{re.escape(text)}\b"


def number(n: int | str) -> Check:
    return Check(answer_regex=rf"(?<![\d.]){re.escape(str(n))}(?!\.?\d)")


def has(shown: Iterable[str], hidden: Iterable[str] = ()) -> Check:
    """An answer that names everything in ``shown`` and nothing in ``hidden``."""
    ahead = "".join(f"(?=.*{_word(s)})" for s in shown)
    ahead += "".join(f"(?!.*{_word(h)})" for h in hidden)
    return Check(answer_regex="(?s)^" + ahead)


def text_name(rng: random.Random, taken: set[str] | None = None) -> str:
    return stem(rng, taken) + rng.choice(TEXT)


def distinct_lines(rng: random.Random, n: int, pool: Iterable[str] = WORDS) -> list[str]:
    """``n`` lines of two to four words, none inside another, so quoting one quotes no other."""
    words, out = list(pool), list[str]()
    while len(out) < n:
        line = " ".join(rng.sample(words, rng.randint(2, 4)))
        if all(line not in o and o not in line for o in out):
            out.append(line)
    return out


def body(rows: Iterable[str]) -> str:
    return "".join(f"{r}\n" for r in rows)


def shell(
    family: str, prompt: str, files: dict[str, str], check: Check, command: str, answer: str
) -> Generated:
    """A task solved by one ``run_command`` call."""
    return Generated(family, prompt, files, check, [call("run_command", command=command)], answer)


def table(
    rng: random.Random, columns: int, rows: int, high: int = 99
) -> tuple[str, list[str], list[str], list[list[int]]]:
    """A CSV's name, its header, its row names and its numbers (values of 1 to 3 digits)."""
    name = rng.choice(["sales", "scores", "stock", "team", "orders", "stats"]) + ".csv"
    header = [rng.choice(["name", "who", "person"]), *rng.sample(COLUMNS, columns)]
    who = rng.sample(NAMES, rows)
    values = [[rng.choice([rng.randint(1, 9), rng.randint(10, high)]) for _ in range(columns)]]
    values += [[rng.randint(1, high) for _ in range(columns)] for _ in range(rows - 1)]
    rng.shuffle(values)
    return name, header, who, values


def csv_body(header: list[str], who: list[str], values: list[list[int]]) -> str:
    return body(
        [",".join(header), *(",".join([w, *map(str, v)]) for w, v in zip(who, values, strict=True))]
    )
