"""Generators of the curriculum's counting families: files, words, rows, functions, lines,
characters and TODOs, and the line that occurs most often. Each workspace holds the trap that
the obvious miscount falls into (a word twice on one line, repeats apart, files in a folder).
"""

from __future__ import annotations

import itertools
import random

from cli.evals.generators.base import Generated, Generator, pick
from cli.evals.generators.families_shared import (
    FOLDERS,
    body,
    csv_body,
    has,
    number,
    shell,
    table,
    text_name,
)
from cli.evals.generators.words import NAMES, WORDS, lines, stem

VERBS = ("load", "save", "parse", "check", "clean", "send", "read", "show", "build", "merge")


def count_files_ext(rng: random.Random) -> Generated:
    """How many files have an extension, counting those in a subfolder."""
    ext, *others = rng.sample([".py", ".log", ".md", ".csv", ".txt", ".json"], 3)
    taken: set[str] = set()
    folder = rng.choice(FOLDERS)
    n = rng.randint(2, 6)
    inside = rng.randint(1, n - 1)
    paths = [f"{folder}/" * (i < inside) + stem(rng, taken) + ext for i in range(n)]
    paths += [stem(rng, taken) + rng.choice(others) for _ in range(rng.randint(1, 3))]
    prompt = pick(
        rng,
        f"How many {ext} files are there, subfolders included?",
        f"Count the {ext} files in all folders.",
        f"how many {ext} files are in the workspace and its folders?",
        f"Please count every {ext} file here, in every folder.",
    )
    return shell(
        "count-files-ext",
        prompt,
        dict.fromkeys(paths, "x\n"),
        number(n),
        f"find . -name '*{ext}' | wc -l",
        f"There are {n} {ext} files.",
    )


def count_word_occurrences(rng: random.Random) -> Generated:
    """How many times a word occurs in a file, some lines holding it more than once."""
    name = text_name(rng)
    word, *others = rng.sample(WORDS, 12)
    rows = [rng.sample(others, rng.randint(2, 4)) for _ in range(rng.randint(4, 8))]
    hits = rng.sample(range(len(rows)), rng.randint(2, min(4, len(rows))))
    for i in hits:
        for _ in range(2 if i == hits[0] else rng.randint(1, 3)):
            rows[i].insert(rng.randint(0, len(rows[i])), word)
    total = sum(r.count(word) for r in rows)
    prompt = pick(
        rng,
        f"How many times does the word {word} occur in {name}?",
        f"Count how many times {word} appears in {name}.",
        f"how often is {word} used in {name}? count every time",
        f"Please count every {word} in {name}.",
    )
    return shell(
        "count-word-occurrences",
        prompt,
        {name: body(" ".join(r) for r in rows)},
        number(total),
        f"grep -o -w {word} {name} | wc -l",
        f"{word} occurs {total} times in {name}.",
    )


def count_csv_rows(rng: random.Random) -> Generated:
    """How many data rows a CSV has, its header not counted."""
    n = rng.randint(3, 12)
    name, header, who, values = table(rng, rng.randint(1, 3), n)
    prompt = pick(
        rng,
        f"How many data rows does {name} have?",
        f"How many rows are in {name}, not counting the header?",
        f"count the rows of {name} without the header line",
        f"How many records are in {name}? Leave out the header row.",
    )
    return shell(
        "count-csv-rows",
        prompt,
        {name: csv_body(header, who, values)},
        number(n),
        f"tail -n +2 {name} | wc -l",
        f"{name} has {n} data rows.",
    )


def count_functions(rng: random.Random) -> Generated:
    """How many functions a Python file defines (a ``defaults`` line is not one)."""
    name = rng.choice(["utils", "helpers", "tools", "app", "main", "lib"]) + ".py"
    n = rng.randint(2, 6)
    fns = [f"{v}_{w}" for v, w in zip(rng.sample(VERBS, n), rng.sample(WORDS, n), strict=True)]
    code = [f"defaults = {{'{rng.choice(WORDS)}': {rng.randint(1, 9)}}}\n"]
    code += [f"def {f}(x):\n    return x + {rng.randint(1, 9)}\n" for f in fns]
    code.append(f"print({rng.choice(fns)}(1))\n")
    prompt = pick(
        rng,
        f"How many functions does {name} define?",
        f"Count the functions defined in {name}.",
        f"how many functions are in {name}?",
        f"Please tell me how many functions {name} has.",
    )
    return shell(
        "count-functions",
        prompt,
        {name: "\n".join(code)},
        number(n),
        f"grep -c '^def ' {name}",
        f"{name} defines {n} functions.",
    )


def _spread(rng: random.Random, items: list[str]) -> list[str]:
    """``items`` shuffled so that no line equals the one before it."""
    while True:
        rng.shuffle(items)
        if all(a != b for a, b in itertools.pairwise(items)):
            return items


def count_unique_lines(rng: random.Random) -> Generated:
    """How many different lines a file has (repeats apart, so ``uniq`` alone miscounts)."""
    name = text_name(rng)
    pool = rng.sample(rng.choice([WORDS, NAMES]), rng.randint(3, 6))
    rows = _spread(rng, pool + rng.sample(pool, rng.randint(2, len(pool))))
    n = len(pool)
    prompt = pick(
        rng,
        f"How many different lines are in {name}?",
        f"How many unique lines does {name} have?",
        f"count the distinct lines in {name}",
        f"Ignoring repeats, how many lines does {name} have?",
    )
    return shell(
        "count-unique-lines",
        prompt,
        {name: body(rows)},
        number(n),
        f"sort -u {name} | wc -l",
        f"{name} has {n} different lines.",
    )


def count_chars(rng: random.Random) -> Generated:
    """How many characters a file has."""
    name = text_name(rng)
    text = lines(rng, rng.randint(1, 4))
    n = len(text)
    prompt = pick(
        rng,
        f"How many characters are in {name}?",
        f"Count the characters in {name}.",
        f"how many characters does {name} have?",
        f"What is the character count of {name}?",
    )
    return shell(
        "count-chars",
        prompt,
        {name: text},
        number(n),
        f"wc -m < {name}",
        f"{name} has {n} characters.",
    )


def most_common_line(rng: random.Random) -> Generated:
    """The line that occurs most often (neither the first nor the last line)."""
    name = text_name(rng)
    top, *rest = rng.sample(rng.choice([WORDS, NAMES]), rng.randint(3, 5))
    most = rng.randint(3, 5)
    rows = [top] * most + [r for r in rest for _ in range(rng.randint(1, most - 1))]
    while top in (rows[0], rows[-1]):
        rng.shuffle(rows)
    prompt = pick(
        rng,
        f"Which line occurs most often in {name}?",
        f"What is the most common line in {name}?",
        f"find the line that appears most in {name}",
        f"Which line of {name} is repeated the most times?",
    )
    return shell(
        "most-common-line",
        prompt,
        {name: body(rows)},
        has([top], rest),
        f"sort {name} | uniq -c | sort -rn | head -n 1",
        f"The most common line in {name} is {top} ({most} times).",
    )


def count_todo_all(rng: random.Random) -> Generated:
    """How many TODOs there are across all files, one line holding two."""
    taken: set[str] = set()
    folder = rng.choice(FOLDERS)
    paths = [stem(rng, taken) + rng.choice([".py", ".txt", ".md"]) for _ in range(3)]
    paths[0] = f"{folder}/{paths[0]}"
    files = {}
    for i, path in enumerate(paths):
        rows = lines(rng, rng.randint(1, 3)).splitlines()
        todos = [f"TODO {w}" for w in rng.sample(WORDS, rng.randint(1 if i < 2 else 0, 2))]
        if i == 0:  # two on one line, so counting lines with a TODO falls short
            todos[0] += f" and TODO {rng.choice(NAMES)}"
        for todo in todos:
            rows.insert(rng.randint(0, len(rows)), todo)
        files[path] = body(rows)
    n = sum(text.count("TODO") for text in files.values())
    prompt = pick(
        rng,
        "How many TODOs are there across all files?",
        "Count every TODO in the workspace, in all files and folders.",
        "how many TODO notes are left in all the files?",
        "Please tell me the total number of TODOs in all files.",
        "count all the TODO markers in every file",
    )
    return shell(
        "count-todo-all",
        prompt,
        files,
        number(n),
        "grep -r -o TODO . | wc -l",
        f"There are {n} TODOs in all.",
    )


COUNTING_FAMILIES: dict[str, Generator] = {
    "count-files-ext": count_files_ext,
    "count-word-occurrences": count_word_occurrences,
    "count-csv-rows": count_csv_rows,
    "count-functions": count_functions,
    "count-unique-lines": count_unique_lines,
    "count-chars": count_chars,
    "most-common-line": most_common_line,
    "count-todo-all": count_todo_all,
}
