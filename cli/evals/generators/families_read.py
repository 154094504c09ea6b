"""Generators of the curriculum's reading, counting, arithmetic and searching families.

Each family has one canonical gold command (``head -n 1 F``, ``grep -n WORD F``, an ``awk``
or ``python3 -c`` one-liner), so a small model learns one form per kind of question. The
workspaces make lucky guesses fail: the first line differs from the others, the largest number
is not the last line and sorts last only by value, a word occurs twice on some line.
``newest-file`` has no generator: the suite format cannot set modification times, so the file
changed last would be an accident of the order the files are written in.
"""

from __future__ import annotations

import datetime
import itertools
import random
import re
from collections.abc import Iterable

from cli.evals.generators.base import Generated, Generator, call, pick
from cli.evals.generators.words import NAMES, WORDS, lines, stem
from cli.evals.suite import Check

TEXT = (".txt", ".md", ".log")
FOLDERS = ("docs", "data", "src", "archive", "photos", "old", "backup", "music", "tests")
COLUMNS = ("price", "qty", "score", "age", "points", "sales", "weight", "hours", "visits")
VERBS = ("load", "save", "parse", "check", "clean", "send", "read", "show", "build", "merge")
ORDINALS = ("", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
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


def _word(text: str) -> str:
    return rf"\b{re.escape(text)}\b"


def _number(n: int | str) -> Check:
    return Check(answer_regex=rf"(?<![\d.]){re.escape(str(n))}(?!\.?\d)")


def _has(shown: Iterable[str], hidden: Iterable[str] = ()) -> Check:
    """An answer that names everything in ``shown`` and nothing in ``hidden``."""
    ahead = "".join(f"(?=.*{_word(s)})" for s in shown)
    ahead += "".join(f"(?!.*{_word(h)})" for h in hidden)
    return Check(answer_regex="(?s)^" + ahead)


def _text_name(rng: random.Random, taken: set[str] | None = None) -> str:
    return stem(rng, taken) + rng.choice(TEXT)


def _distinct_lines(rng: random.Random, n: int, pool: Iterable[str] = WORDS) -> list[str]:
    """``n`` lines of two to four words, none inside another, so quoting one quotes no other."""
    words, out = list(pool), list[str]()
    while len(out) < n:
        line = " ".join(rng.sample(words, rng.randint(2, 4)))
        if all(line not in o and o not in line for o in out):
            out.append(line)
    return out


def _body(rows: Iterable[str]) -> str:
    return "".join(f"{r}\n" for r in rows)


def _shell(
    family: str, prompt: str, files: dict[str, str], check: Check, command: str, answer: str
) -> Generated:
    """A task solved by one ``run_command`` call."""
    return Generated(family, prompt, files, check, [call("run_command", command=command)], answer)


def first_line(rng: random.Random) -> Generated:
    """The first line of a file."""
    name = _text_name(rng)
    rows = _distinct_lines(rng, rng.randint(3, 8))
    prompt = pick(
        rng,
        f"What is the first line of {name}?",
        f"Show me the first line of {name}.",
        f"print the first line of {name} please",
        f"What does the first line of {name} say?",
    )
    return _shell(
        "first-line",
        prompt,
        {name: _body(rows)},
        _has([rows[0]], rows[1:]),
        f"head -n 1 {name}",
        f"The first line of {name} is: {rows[0]}",
    )


def nth_line(rng: random.Random) -> Generated:
    """Line N of a file, never the first or the last."""
    name = _text_name(rng)
    rows = _distinct_lines(rng, rng.randint(4, 9))
    n = rng.randint(2, min(len(rows) - 1, len(ORDINALS) - 1))
    prompt = pick(
        rng,
        f"What is line {n} of {name}?",
        f"Show line {n} of {name}.",
        f"what does the {ORDINALS[n]} line of {name} say?",
        f"Please print line number {n} in {name}.",
    )
    return _shell(
        "nth-line",
        prompt,
        {name: _body(rows)},
        _has([rows[n - 1]], rows[: n - 1] + rows[n:]),
        f"sed -n '{n}p' {name}",
        f"Line {n} of {name} is: {rows[n - 1]}",
    )


def head_lines(rng: random.Random) -> Generated:
    """The first N lines of a file."""
    name = _text_name(rng)
    rows = _distinct_lines(rng, rng.randint(5, 9))
    n = rng.randint(2, len(rows) - 2)
    prompt = pick(
        rng,
        f"Show the first {n} lines of {name}.",
        f"What are the first {n} lines of {name}?",
        f"print the top {n} lines of {name}",
        f"Please show me the first {n} lines in {name}.",
    )
    shown = "\n".join(rows[:n])
    return _shell(
        "head-lines",
        prompt,
        {name: _body(rows)},
        _has(rows[:n], rows[n:]),
        f"head -n {n} {name}",
        f"The first {n} lines of {name} are:\n{shown}",
    )


def show_file(rng: random.Random) -> Generated:
    """What a short file says."""
    name = _text_name(rng)
    rows = _distinct_lines(rng, rng.randint(1, 4))
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
        {name: _body(rows)},
        _has(rows),
        [call("read_file", path=name)],
        f"{name} says:\n{shown}",
    )


def line_range(rng: random.Random) -> Generated:
    """Lines N to M of a file, inside it (not from its first line, not to its last)."""
    name = _text_name(rng)
    rows = _distinct_lines(rng, rng.randint(5, 9))
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
    return _shell(
        "line-range",
        prompt,
        {name: _body(rows)},
        _has(rows[start - 1 : end], rows[: start - 1] + rows[end:]),
        f"sed -n '{start},{end}p' {name}",
        f"Lines {start} to {end} of {name} are:\n{shown}",
    )


def _table(
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


def _csv(header: list[str], who: list[str], values: list[list[int]]) -> str:
    return _body(
        [",".join(header), *(",".join([w, *map(str, v)]) for w, v in zip(who, values, strict=True))]
    )


def csv_header(rng: random.Random) -> Generated:
    """The column names of a CSV file."""
    name, header, who, values = _table(rng, rng.randint(2, 3), rng.randint(2, 5))
    prompt = pick(
        rng,
        f"What are the column names of {name}?",
        f"Which columns does {name} have?",
        f"list the columns in {name}",
        f"What columns are in {name}, please?",
    )
    return _shell(
        "csv-header",
        prompt,
        {name: _csv(header, who, values)},
        _has(header),
        f"head -n 1 {name}",
        f"The columns of {name} are: {', '.join(header)}",
    )


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
    return _shell(
        "count-files-ext",
        prompt,
        dict.fromkeys(paths, "x\n"),
        _number(n),
        f"find . -name '*{ext}' | wc -l",
        f"There are {n} {ext} files.",
    )


def count_word_occurrences(rng: random.Random) -> Generated:
    """How many times a word occurs in a file, some lines holding it more than once."""
    name = _text_name(rng)
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
    return _shell(
        "count-word-occurrences",
        prompt,
        {name: _body(" ".join(r) for r in rows)},
        _number(total),
        f"grep -o -w {word} {name} | wc -l",
        f"{word} occurs {total} times in {name}.",
    )


def count_csv_rows(rng: random.Random) -> Generated:
    """How many data rows a CSV has, its header not counted."""
    n = rng.randint(3, 12)
    name, header, who, values = _table(rng, rng.randint(1, 3), n)
    prompt = pick(
        rng,
        f"How many data rows does {name} have?",
        f"How many rows are in {name}, not counting the header?",
        f"count the rows of {name} without the header line",
        f"How many records are in {name}? Leave out the header row.",
    )
    return _shell(
        "count-csv-rows",
        prompt,
        {name: _csv(header, who, values)},
        _number(n),
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
    return _shell(
        "count-functions",
        prompt,
        {name: "\n".join(code)},
        _number(n),
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
    name = _text_name(rng)
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
    return _shell(
        "count-unique-lines",
        prompt,
        {name: _body(rows)},
        _number(n),
        f"sort -u {name} | wc -l",
        f"{name} has {n} different lines.",
    )


def count_chars(rng: random.Random) -> Generated:
    """How many characters a file has."""
    name = _text_name(rng)
    text = lines(rng, rng.randint(1, 4))
    n = len(text)
    prompt = pick(
        rng,
        f"How many characters are in {name}?",
        f"Count the characters in {name}.",
        f"how many characters does {name} have?",
        f"What is the character count of {name}?",
    )
    return _shell(
        "count-chars",
        prompt,
        {name: text},
        _number(n),
        f"wc -m < {name}",
        f"{name} has {n} characters.",
    )


def most_common_line(rng: random.Random) -> Generated:
    """The line that occurs most often (neither the first nor the last line)."""
    name = _text_name(rng)
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
    return _shell(
        "most-common-line",
        prompt,
        {name: _body(rows)},
        _has([top], rest),
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
        files[path] = _body(rows)
    n = sum(text.count("TODO") for text in files.values())
    prompt = pick(
        rng,
        "How many TODOs are there across all files?",
        "Count every TODO in the workspace, in all files and folders.",
        "how many TODO notes are left in all the files?",
        "Please tell me the total number of TODOs in all files.",
        "count all the TODO markers in every file",
    )
    return _shell(
        "count-todo-all",
        prompt,
        files,
        _number(n),
        "grep -r -o TODO . | wc -l",
        f"There are {n} TODOs in all.",
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
    return _shell(
        "sum-numbers",
        prompt,
        {name: _body(map(str, nums))},
        _number(sum(nums)),
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
    return _shell(
        "max-number",
        prompt,
        {name: _body(map(str, nums))},
        _has([str(top)], [str(x) for x in nums if x != top]),
        f"sort -n {name} | tail -n 1",
        f"The largest number in {name} is {top}.",
    )


def _summed(
    rng: random.Random, rows: int
) -> tuple[str, list[str], list[str], list[list[int]], int]:
    """A CSV and a numeric column of it (1-based among its fields) whose total is its own."""
    while True:
        name, header, who, values = _table(rng, rng.randint(2, 3), rows, 500)
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
    return _shell(
        "csv-column-sum",
        prompt,
        {name: _csv(header, who, values)},
        _number(total),
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
    return _shell(
        "csv-column-average",
        prompt,
        {name: _csv(header, who, values)},
        _number(mean),
        f"awk -F, 'NR>1 {{s+=${k}; n++}} END {{print s/n}}' {name}",
        f"The average {col} in {name} is {mean}.",
    )


def csv_column_max(rng: random.Random) -> Generated:
    """Which row has the largest value of a column (not the last row, not last in text order)."""
    while True:
        name, header, who, values = _table(rng, rng.randint(1, 2), rng.randint(4, 7), 500)
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
    return _shell(
        "csv-column-max",
        prompt,
        {name: _csv(header, who, values)},
        _has([best], [w for w in who if w != best]),
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
        if _unanswered(prompt, _number(value)):
            break
    return _shell(
        "calc-expression",
        prompt,
        {},
        _number(value),
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
    return _shell(
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
        if _unanswered(prompt, _number(n)):
            break
    dates = [f"datetime.date({d.year}, {d.month}, {d.day})" for d in (end, start)]
    return _shell(
        "count-days",
        prompt,
        {},
        _number(n),
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
    return _shell(
        "sum-two-files",
        prompt,
        {a: _body(map(str, na)), b: _body(map(str, nb))},
        _number(total),
        f"cat {a} {b} | awk '{{s+=$1}} END {{print s}}'",
        f"The total of the numbers in {a} and {b} is {total}.",
    )


def find_by_name(rng: random.Random) -> Generated:
    """The files whose names end in an extension, in any folder."""
    ext, *others = rng.sample([".py", ".log", ".md", ".csv", ".txt", ".json"], 3)
    taken: set[str] = set()
    folder = rng.choice(FOLDERS)
    n = rng.randint(2, 4)
    inside = rng.randint(1, n - 1)
    found = [f"{folder}/" * (i < inside) + stem(rng, taken) + ext for i in range(n)]
    rest = [f"{folder}/" * (i == 0) + stem(rng, taken) + rng.choice(others) for i in range(3)]
    prompt = pick(
        rng,
        f"Find all the {ext} files.",
        f"Which files end in {ext}? Look in every folder.",
        f"list every {ext} file, subfolders too",
        f"Where are the {ext} files?",
    )
    return _shell(
        "find-by-name",
        prompt,
        dict.fromkeys(found + rest, "x\n"),
        _has([p.split("/")[-1] for p in found], [p.split("/")[-1] for p in rest]),
        f"find . -name '*{ext}'",
        f"The {ext} files are: {', '.join('./' + p for p in sorted(found))}",
    )


def _with_word(rng: random.Random, word: str, n: int, hits: int) -> tuple[list[str], list[int]]:
    """``n`` distinct lines, ``hits`` of them holding ``word`` once (as ``word`` itself)."""
    while True:
        rows = _distinct_lines(rng, n, [w for w in WORDS if w != word])
        where = sorted(rng.sample(range(n), hits))
        for i in where:
            parts = rows[i].split()
            parts.insert(rng.randint(0, len(parts)), word)
            rows[i] = " ".join(parts)
        low = [r.lower() for r in rows]
        if all(a not in b for a in low for b in low if a != b):
            return rows, where


def grep_lines(rng: random.Random) -> Generated:
    """The lines of a file that contain a word."""
    name, word = _text_name(rng), rng.choice(WORDS)
    rows, where = _with_word(rng, word, rng.randint(5, 9), rng.randint(2, 3))
    found = [rows[i] for i in where]
    prompt = pick(
        rng,
        f"Show the lines of {name} that contain {word}.",
        f"Which lines in {name} mention {word}?",
        f"print every line of {name} with {word} in it",
        f"Find the lines in {name} that have the word {word}, please.",
    )
    shown = "\n".join(found)
    return _shell(
        "grep-lines",
        prompt,
        {name: _body(rows)},
        _has(found, [r for r in rows if r not in found]),
        f"grep {word} {name}",
        f"The lines of {name} with {word} are:\n{shown}",
    )


def grep_line_number(rng: random.Random) -> Generated:
    """The number of the line a word is on (never line 1)."""
    name, word = _text_name(rng), rng.choice(WORDS)
    rows, where = _with_word(rng, word, rng.randint(4, 9), 1)
    while where[0] == 0:
        rows, where = _with_word(rng, word, len(rows), 1)
    n = where[0] + 1
    prompt = pick(
        rng,
        f"On which line of {name} is {word}?",
        f"What line number is {word} on in {name}?",
        f"which line of {name} mentions {word}? I need the line number",
        f"Find the line number of {word} in {name}.",
    )
    return _shell(
        "grep-line-number",
        prompt,
        {name: _body(rows)},
        _number(n),
        f"grep -n {word} {name}",
        f"{word} is on line {n} of {name}.",
    )


def files_with_word(rng: random.Random) -> Generated:
    """Every file that contains a word (two or three do); ``find_text`` names them all."""
    taken: set[str] = set()
    word, *others = rng.sample(WORDS, 10)
    paths = [_text_name(rng, taken) for _ in range(rng.randint(4, 5))]
    paths[0] = f"{rng.choice(FOLDERS)}/{paths[0]}"
    files = {p: " ".join(rng.sample(others, 3)) + "\n" for p in paths}
    found = rng.sample(paths, rng.randint(2, 3))
    for p in found:
        files[p] = f"{rng.choice(others)} {word} {rng.choice(others)}\n"
    prompt = pick(
        rng,
        f"Which files mention {word}?",
        f"List every file that contains {word}.",
        f"find all the files with the word {word} in them",
        f"Which files contain {word}? There may be several.",
    )
    shown = sorted(found)
    return Generated(
        "files-with-word",
        prompt,
        files,
        _has(
            [p.split("/")[-1] for p in shown], [p.split("/")[-1] for p in paths if p not in found]
        ),
        [call("find_text", text=word)],
        f"{word} is in {', '.join(shown)}.",
    )


def empty_files(rng: random.Random) -> Generated:
    """Which files are empty."""
    taken: set[str] = set()
    paths = [_text_name(rng, taken) for _ in range(rng.randint(4, 6))]
    paths[0] = f"{rng.choice(FOLDERS)}/{paths[0]}"
    empty = rng.sample(paths, rng.randint(1, min(3, len(paths) - 2)))
    files = {p: "" if p in empty else lines(rng, rng.randint(1, 3)) for p in paths}
    prompt = pick(
        rng,
        "Which files are empty?",
        "Find the empty files.",
        "list all empty files in the workspace",
        "Are any files empty? Tell me which ones, in every folder.",
        "Please find every empty file here.",
    )
    shown = sorted(empty)
    return _shell(
        "empty-files",
        prompt,
        files,
        _has(
            [p.split("/")[-1] for p in shown], [p.split("/")[-1] for p in paths if p not in empty]
        ),
        "find . -type f -empty",
        f"The empty files are: {', '.join('./' + p for p in shown)}",
    )


def list_subfolders(rng: random.Random) -> Generated:
    """The folders of the workspace, a nested one among them."""
    taken: set[str] = set()
    tops = rng.sample(FOLDERS, rng.randint(2, 3))
    nested = f"{tops[0]}/{rng.choice([f for f in FOLDERS if f not in tops])}"
    folders = [*tops, nested]
    files = {f"{f}/{_text_name(rng, taken)}": "x\n" for f in folders}
    files.update({_text_name(rng, taken): "x\n" for _ in range(rng.randint(1, 2))})
    prompt = pick(
        rng,
        "What folders are in the workspace, subfolders included?",
        "List all the folders here, nested ones too.",
        "which directories are there, including subfolders?",
        "Show me every folder and subfolder.",
        "Please list every directory in the workspace, nested ones included.",
    )
    shown = sorted(folders)
    return _shell(
        "list-subfolders",
        prompt,
        files,
        _has(folders, [p.split("/")[-1] for p in files]),
        "find . -mindepth 1 -type d",
        f"The folders are: {', '.join('./' + f for f in shown)}",
    )


def grep_ignore_case(rng: random.Random) -> Generated:
    """The lines of a file with a word in any letter case."""
    name, word = _text_name(rng), rng.choice(WORDS)
    rows, where = _with_word(rng, word, rng.randint(5, 8), rng.randint(2, 3))
    cases = [word.upper(), word.capitalize(), word]
    for i, case in zip(where, rng.sample(cases, len(where)), strict=True):
        rows[i] = rows[i].replace(word, case)
    found = [rows[i] for i in where]
    prompt = pick(
        rng,
        f"Show the lines of {name} that contain {word}, in any case.",
        f"Which lines in {name} mention {word}? Ignore upper and lower case.",
        f"print every line of {name} with {word} in it, whatever the capitals",
        f"find the lines with {word} in {name}, case-insensitive please",
    )
    shown = "\n".join(found)
    return _shell(
        "grep-ignore-case",
        prompt,
        {name: _body(rows)},
        _has(found, [r for r in rows if r not in found]),
        f"grep -i {word} {name}",
        f"The lines of {name} with {word} in any case are:\n{shown}",
    )


READ_FAMILIES: dict[str, Generator] = {
    "first-line": first_line,
    "nth-line": nth_line,
    "head-lines": head_lines,
    "show-file": show_file,
    "line-range": line_range,
    "csv-header": csv_header,
    "count-files-ext": count_files_ext,
    "count-word-occurrences": count_word_occurrences,
    "count-csv-rows": count_csv_rows,
    "count-functions": count_functions,
    "count-unique-lines": count_unique_lines,
    "count-chars": count_chars,
    "most-common-line": most_common_line,
    "count-todo-all": count_todo_all,
    "sum-numbers": sum_numbers,
    "max-number": max_number,
    "csv-column-sum": csv_column_sum,
    "csv-column-average": csv_column_average,
    "csv-column-max": csv_column_max,
    "calc-expression": calc_expression,
    "calc-percent": calc_percent,
    "count-days": count_days,
    "sum-two-files": sum_two_files,
    "find-by-name": find_by_name,
    "grep-lines": grep_lines,
    "grep-line-number": grep_line_number,
    "files-with-word": files_with_word,
    "empty-files": empty_files,
    "list-subfolders": list_subfolders,
    "grep-ignore-case": grep_ignore_case,
}
