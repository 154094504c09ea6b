"""Generators of the curriculum's reading families: a line, some lines, a whole file or a CSV's
header, each read with one canonical tool call.
"""

from __future__ import annotations

import random

from cli.evals.generators.base import Generated, Generator, call, pick
from cli.evals.generators.families_shared import (
    body,
    csv_body,
    distinct_lines,
    has,
    shell,
    table,
    text_name,
)

ORDINALS = ("", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


def first_line(rng: random.Random) -> Generated:
    """The first line of a file."""
    name = text_name(rng)
    rows = distinct_lines(rng, rng.randint(3, 8))
    prompt = pick(
        rng,
        f"What is the first line of {name}?",
        f"Show me the first line of {name}.",
        f"print the first line of {name} please",
        f"What does the first line of {name} say?",
    )
    return shell(
        "first-line",
        prompt,
        {name: body(rows)},
        has([rows[0]], rows[1:]),
        f"head -n 1 {name}",
        f"The first line of {name} is: {rows[0]}",
    )


def nth_line(rng: random.Random) -> Generated:
    """Line N of a file, never the first or the last."""
    name = text_name(rng)
    rows = distinct_lines(rng, rng.randint(4, 9))
    n = rng.randint(2, min(len(rows) - 1, len(ORDINALS) - 1))
    prompt = pick(
        rng,
        f"What is line {n} of {name}?",
        f"Show line {n} of {name}.",
        f"what does the {ORDINALS[n]} line of {name} say?",
        f"Please print line number {n} in {name}.",
    )
    return shell(
        "nth-line",
        prompt,
        {name: body(rows)},
        has([rows[n - 1]], rows[: n - 1] + rows[n:]),
        f"sed -n '{n}p' {name}",
        f"Line {n} of {name} is: {rows[n - 1]}",
    )


def head_lines(rng: random.Random) -> Generated:
    """The first N lines of a file."""
    name = text_name(rng)
    rows = distinct_lines(rng, rng.randint(5, 9))
    n = rng.randint(2, len(rows) - 2)
    prompt = pick(
        rng,
        f"Show the first {n} lines of {name}.",
        f"What are the first {n} lines of {name}?",
        f"print the top {n} lines of {name}",
        f"Please show me the first {n} lines in {name}.",
    )
    shown = "\n".join(rows[:n])
    return shell(
        "head-lines",
        prompt,
        {name: body(rows)},
        has(rows[:n], rows[n:]),
        f"head -n {n} {name}",
        f"The first {n} lines of {name} are:\n{shown}",
    )


def show_file(rng: random.Random) -> Generated:
    """What a short file says."""
    name = text_name(rng)
    rows = distinct_lines(rng, rng.randint(1, 4))
    prompt = pick(
        rng,
        f"What does {name} say?",
        f"Show me {name}.",
        f"read {name} to me please",
        f"What are the contents of {name}?",
        f"show me what is written in {name}",
    )
    shown = "\n".join(rows)
    return Generated(
        "show-file",
        prompt,
        {name: body(rows)},
        has(rows),
        [call("read_file", path=name)],
        f"{name} says:\n{shown}",
    )


def line_range(rng: random.Random) -> Generated:
    """Lines N to M of a file, inside it (not from its first line, not to its last)."""
    name = text_name(rng)
    rows = distinct_lines(rng, rng.randint(5, 9))
    start = rng.randint(2, len(rows) - 2)
    end = rng.randint(start + 1, len(rows) - 1)
    prompt = pick(
        rng,
        f"Show lines {start} to {end} of {name}.",
        f"What are lines {start} through {end} of {name}?",
        f"print lines {start}-{end} of {name}",
        f"Please show me lines {start} to {end} in {name}.",
    )
    shown = "\n".join(rows[start - 1 : end])
    return shell(
        "line-range",
        prompt,
        {name: body(rows)},
        has(rows[start - 1 : end], rows[: start - 1] + rows[end:]),
        f"sed -n '{start},{end}p' {name}",
        f"Lines {start} to {end} of {name} are:\n{shown}",
    )


def csv_header(rng: random.Random) -> Generated:
    """The column names of a CSV file."""
    name, header, who, values = table(rng, rng.randint(2, 3), rng.randint(2, 5))
    prompt = pick(
        rng,
        f"What are the column names of {name}?",
        f"Which columns does {name} have?",
        f"list the columns in {name}",
        f"What columns are in {name}, please?",
    )
    return shell(
        "csv-header",
        prompt,
        {name: csv_body(header, who, values)},
        has(header),
        f"head -n 1 {name}",
        f"The columns of {name} are: {', '.join(header)}",
    )


READING_FAMILIES: dict[str, Generator] = {
    "first-line": first_line,
    "nth-line": nth_line,
    "head-lines": head_lines,
    "show-file": show_file,
    "line-range": line_range,
    "csv-header": csv_header,
}
