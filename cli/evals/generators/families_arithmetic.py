"""Generators of the curriculum's arithmetic families: sums, maxima and means of numbers in files
and CSV columns, expressions, percentages and days between dates, each computed by one command
(``awk``, ``sort`` or ``python3 -c``) rather than in the model's head.
"""

from __future__ import annotations

import datetime
import random
import re

from cli.evals.generators.base import Generated, Generator, pick
from cli.evals.generators.families_shared import body, csv_body, has, number, shell, table
from cli.evals.generators.words import stem
from cli.evals.suite import Check

MONTHS = (
    "",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def _numbers(rng: random.Random, n: int) -> list[int]:
    """``n`` different numbers of one to three digits."""
    pools = [range(1, 10), range(10, 100), range(100, 1000)]
    found: set[int] = set()
    while len(found) < n:
        found.add(rng.choice(rng.choice(pools)))
    out = sorted(found)
    rng.shuffle(out)
    return out


def sum_numbers(rng: random.Random) -> Generated:
    """The total of the numbers in a file, one per line."""
    name = rng.choice(["costs", "amounts", "expenses", "sales", "points", "numbers"]) + ".txt"
    nums = _numbers(rng, rng.randint(4, 9))
    prompt = pick(
        rng,
        f"What is the total of the numbers in {name}?",
        f"Add up the numbers in {name}.",
        f"sum the numbers in {name}",
        f"What do the numbers in {name} add up to? Give me the sum.",
    )
    return shell(
        "sum-numbers",
        prompt,
        {name: body(map(str, nums))},
        number(sum(nums)),
        f"awk '{{s+=$1}} END {{print s}}' {name}",
        f"The total is {sum(nums)}.",
    )


def max_number(rng: random.Random) -> Generated:
    """The largest number in a file: not its last line, and not last in text order."""
    name = rng.choice(["numbers", "values", "readings", "scores", "data"]) + ".txt"
    nums = _numbers(rng, rng.randint(5, 9))
    while nums[-1] == max(nums) or max(nums, key=str) == max(nums):
        nums = _numbers(rng, len(nums))
    top = max(nums)
    prompt = pick(
        rng,
        f"What is the maximum number in {name}?",
        f"Find the largest number in {name}.",
        f"which value in {name} is the biggest?",
        f"What is the highest value in {name}, please?",
    )
    return shell(
        "max-number",
        prompt,
        {name: body(map(str, nums))},
        has([str(top)], [str(x) for x in nums if x != top]),
        f"sort -n {name} | tail -n 1",
        f"The largest number in {name} is {top}.",
    )


def _summed(
    rng: random.Random, rows: int
) -> tuple[str, list[str], list[str], list[list[int]], int]:
    """A CSV and a numeric column of it (1-based among its fields) whose total is its own."""
    while True:
        name, header, who, values = table(rng, rng.randint(2, 3), rows, 500)
        k = rng.randint(2, len(header))
        totals = [sum(v[i] for v in values) for i in range(len(header) - 1)]
        if totals.count(totals[k - 2]) == 1:
            return name, header, who, values, k


def csv_column_sum(rng: random.Random) -> Generated:
    """The total of one column of a CSV."""
    name, header, who, values, k = _summed(rng, rng.randint(3, 6))
    col, total = header[k - 1], sum(v[k - 2] for v in values)
    prompt = pick(
        rng,
        f"What is the total of the {col} column in {name}?",
        f"Sum the {col} column of {name}.",
        f"add up the {col} column in {name} please",
        f"What do the {col} values in {name} add up to?",
    )
    return shell(
        "csv-column-sum",
        prompt,
        {name: csv_body(header, who, values)},
        number(total),
        f"awk -F, 'NR>1 {{s+=${k}}} END {{print s}}' {name}",
        f"The total of {col} in {name} is {total}.",
    )


def csv_column_average(rng: random.Random) -> Generated:
    """The mean of one column of a CSV (rows chosen so that the mean ends)."""
    rows = rng.choice([2, 4, 5, 8])
    name, header, who, values, k = _summed(rng, rows)
    col = header[k - 1]
    mean = f"{sum(v[k - 2] for v in values) / rows:.6g}"  # awk prints numbers with %.6g
    prompt = pick(
        rng,
        f"What is the average of the {col} column in {name}?",
        f"Compute the mean {col} in {name}.",
        f"what's the average {col} in {name}?",
        f"Please find the average value of the {col} column of {name}.",
    )
    return shell(
        "csv-column-average",
        prompt,
        {name: csv_body(header, who, values)},
        number(mean),
        f"awk -F, 'NR>1 {{s+=${k}; n++}} END {{print s/n}}' {name}",
        f"The average {col} in {name} is {mean}.",
    )


def csv_column_max(rng: random.Random) -> Generated:
    """Which row has the largest value of a column (not the last row, not last in text order)."""
    while True:
        name, header, who, values = table(rng, rng.randint(1, 2), rng.randint(4, 7), 500)
        k = rng.randint(2, len(header))
        col = [v[k - 2] for v in values]
        top = max(col)
        if col.count(top) == 1 and col[-1] != top and max(col, key=str) != top:
            break
    best = who[col.index(top)]
    prompt = pick(
        rng,
        f"Which row of {name} has the largest {header[k - 1]}?",
        f"Who has the highest {header[k - 1]} in {name}?",
        f"in {name}, which name has the biggest {header[k - 1]}?",
        f"Find the row with the maximum {header[k - 1]} in {name}.",
    )
    return shell(
        "csv-column-max",
        prompt,
        {name: csv_body(header, who, values)},
        has([best], [w for w in who if w != best]),
        f"sort -t, -k{k} -n {name} | tail -n 1",
        f"{best} has the largest {header[k - 1]} ({top}).",
    )


def _unanswered(prompt: str, check: Check) -> bool:
    return check.answer_regex is not None and re.search(check.answer_regex, prompt) is None


def calc_expression(rng: random.Random) -> Generated:
    """An arithmetic expression with several operations on numbers of two or three digits."""
    while True:
        a, b, c = rng.randint(12, 999), rng.randint(11, 99), rng.randint(10, 999)
        forms = {f"{a} * {b} + {c}": a * b + c, f"{a} * {b} - {c}": a * b - c}
        forms[f"({a} + {c}) * {b}"] = (a + c) * b
        expr = rng.choice(list(forms))
        value = forms[expr]
        prompt = pick(
            rng,
            f"Compute {expr}.",
            f"What is {expr}? Compute it exactly.",
            f"please compute {expr} for me",
            f"Use python to work out {expr}.",
        )
        if _unanswered(prompt, number(value)):
            break
    return shell(
        "calc-expression",
        prompt,
        {},
        number(value),
        f"python3 -c 'print({expr})'",
        f"{expr} = {value}",
    )


def calc_percent(rng: random.Random) -> Generated:
    """What percent A is of B; A * 100 / B, so that the float prints as the exact decimal."""
    while True:
        b = rng.choice([20, 25, 40, 50, 80, 200, 250, 400, 500, 800, 1000, 1250])
        a = rng.randint(2, b - 1)
        shown = repr(a * 100 / b)
        whole = re.escape(shown.removesuffix(".0"))
        check = Check(answer_regex=rf"(?<![\d.]){whole}(\.0)?(?!\.?\d)")
        prompt = pick(
            rng,
            f"What percent of {b} is {a}? Compute it.",
            f"Compute {a} as a percentage of {b}.",
            f"{a} out of {b}: what percent is that? please compute it",
            f"Use python to work out what percent {a} is of {b}.",
        )
        if _unanswered(prompt, check):
            break
    return shell(
        "calc-percent",
        prompt,
        {},
        check,
        f"python3 -c 'print({a} * 100 / {b})'",
        f"{a} is {shown}% of {b}.",
    )


def count_days(rng: random.Random) -> Generated:
    """The number of days between two dates."""
    while True:
        start = datetime.date(rng.randint(2019, 2026), rng.randint(1, 12), rng.randint(1, 28))
        end = start + datetime.timedelta(days=rng.randint(5, 400))
        iso = rng.random() < 0.5
        one, two = (
            (d.isoformat() if iso else f"{MONTHS[d.month]} {d.day}, {d.year}") for d in (start, end)
        )
        n = (end - start).days
        prompt = pick(
            rng,
            f"How many days are there between {one} and {two}?",
            f"Count the days from {one} to {two}.",
            f"how many days from {one} until {two}?",
            f"Please compute the number of days between {one} and {two}.",
        )
        if _unanswered(prompt, number(n)):
            break
    dates = [f"datetime.date({d.year}, {d.month}, {d.day})" for d in (end, start)]
    return shell(
        "count-days",
        prompt,
        {},
        number(n),
        f"python3 -c 'import datetime; print(({dates[0]} - {dates[1]}).days)'",
        f"There are {n} days between {one} and {two}.",
    )


def sum_two_files(rng: random.Random) -> Generated:
    """The total of the numbers in two files together."""
    taken: set[str] = set()
    a, b = stem(rng, taken) + ".txt", stem(rng, taken) + ".txt"
    na, nb = _numbers(rng, rng.randint(3, 6)), _numbers(rng, rng.randint(3, 6))
    total = sum(na) + sum(nb)
    prompt = pick(
        rng,
        f"What is the total of the numbers in {a} and {b} together?",
        f"Add up all the numbers in {a} and {b}.",
        f"sum the numbers of both {a} and {b}",
        f"What do the numbers in {a} and {b} add up to, all together?",
    )
    return shell(
        "sum-two-files",
        prompt,
        {a: body(map(str, na)), b: body(map(str, nb))},
        number(total),
        f"cat {a} {b} | awk '{{s+=$1}} END {{print s}}'",
        f"The total of the numbers in {a} and {b} is {total}.",
    )


ARITHMETIC_FAMILIES: dict[str, Generator] = {
    "sum-numbers": sum_numbers,
    "max-number": max_number,
    "csv-column-sum": csv_column_sum,
    "csv-column-average": csv_column_average,
    "csv-column-max": csv_column_max,
    "calc-expression": calc_expression,
    "calc-percent": calc_percent,
    "count-days": count_days,
    "sum-two-files": sum_two_files,
}
