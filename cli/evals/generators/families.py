"""One generator per family of the basic suite: randomised names, contents and phrasings."""

from __future__ import annotations

import json
import random
import re

from cli.evals.generators.base import Generated, Generator, call, pick
from cli.evals.generators.words import EXTENSIONS, NAMES, WORDS, lines, stem
from cli.evals.suite import Check


def _number(n: int) -> Check:
    return Check(answer_regex=rf"\b{n}\b")


def _names(*names: str) -> Check:
    return Check(answer_regex="(?s)" + "".join(f"(?=.*{re.escape(n)})" for n in names))


def count(rng: random.Random) -> Generated:
    """How many lines, words or bytes a file has."""
    name = stem(rng) + rng.choice(EXTENSIONS)
    text = lines(rng, rng.randint(2, 12))
    unit, tool, n = rng.choice(
        [
            ("lines", "count_lines", len(text.splitlines())),
            ("words", "count_words", len(text.split())),
            ("bytes", "count_bytes", len(text.encode())),
        ]
    )
    prompt = pick(
        rng,
        f"How many {unit} are in {name}?",
        f"Count the {unit} in {name}.",
        f"how many {unit} does {name} have?",
        f"Tell me the number of {unit} in {name}",
    )
    return Generated(
        "count",
        prompt,
        {name: text},
        _number(n),
        [call(tool, path=name)],
        f"{name} has {n} {unit}.",
    )


def find(rng: random.Random) -> Generated:
    """Which of a few files mentions a word."""
    taken: set[str] = set()
    names = [stem(rng, taken) + ".txt" for _ in range(3)]
    word, *others = rng.sample(WORDS, 7)
    files = {n: " ".join(rng.sample(others, 3)) + "\n" for n in names}
    target = rng.choice(names)
    files[target] = f"{rng.choice(others)} {word}\n"
    prompt = pick(
        rng,
        f"Which file mentions {word}?",
        f"Find the file that talks about the {word}.",
        f"Which file has the word {word} in it?",
        f"In which file is {word}?",
    )
    return Generated(
        "find",
        prompt,
        files,
        Check(answer_regex=re.escape(target)),
        [call("find_text", text=word)],
        f"{word} is in {target}.",
    )


def value(rng: random.Random) -> Generated:
    """A setting read out of an INI, JSON, .env or YAML file."""
    key = rng.choice(["port", "timeout", "retries", "workers", "limit"])
    number = rng.randint(2, 9999)
    kind = rng.choice(["ini", "json", "env", "yaml"])
    other = rng.randint(1, 99)
    if kind == "ini":
        name = rng.choice(["server", "app", "service"]) + ".ini"
        text = f"[main]\nname = {rng.choice(NAMES)}\n{key} = {number}\nlevel = {other}\n"
    elif kind == "json":
        name = rng.choice(["options", "settings", "conf"]) + ".json"
        text = json.dumps({"name": rng.choice(NAMES), key: number, "level": other}, indent=2) + "\n"
    elif kind == "env":
        name, key = ".env", key.upper()
        text = f"APP_NAME={rng.choice(NAMES)}\n{key}={number}\nLEVEL={other}\n"
    else:
        name = rng.choice(["deploy", "service", "job"]) + ".yaml"
        text = f"name: {rng.choice(NAMES)}\n{key}: {number}\nlevel: {other}\n"
    prompt = pick(
        rng,
        f"What {key} is set in {name}?",
        f"What is {key} in {name}?",
        f"Which {key} does {name} configure?",
        f"Look up the {key} in {name}.",
    )
    return Generated(
        "value",
        prompt,
        {name: text},
        _number(number),
        [call("read_file", path=name)],
        f"The {key} in {name} is {number}.",
    )


def listing(rng: random.Random) -> Generated:
    """The files in the workspace or in one folder."""
    taken: set[str] = set()
    names = [stem(rng, taken) + rng.choice(EXTENSIONS) for _ in range(rng.randint(2, 4))]
    if rng.random() < 0.5:
        folder = rng.choice(["docs", "data", "notes", "archive"])
        files = {f"{folder}/{n}": "x\n" for n in names}
        files[stem(rng, taken) + ".py"] = "print('x')\n"
        prompt = pick(
            rng,
            f"List the files in the {folder} folder.",
            f"What is in {folder}?",
            f"Which files are in the {folder} directory?",
        )
        args = {"folder": folder}
    else:
        files = {n: "x\n" for n in names}
        prompt = pick(
            rng,
            "What files are in this folder?",
            "List the files here.",
            "Which files are there?",
            "show me the files in the workspace",
        )
        args = {}
    shown = sorted(n.split("/")[-1] for n in names)
    return Generated(
        "list",
        prompt,
        files,
        _names(*shown),
        [call("list_files", **args)],
        f"The files are {', '.join(shown)}.",
    )


def run(rng: random.Random) -> Generated:
    """What a script prints."""
    name = rng.choice(["show", "calc", "report", "hello", "main", "sum"]) + ".py"
    a, b = rng.randint(2, 300), rng.randint(2, 300)
    if rng.random() < 0.5:
        code, out = f"print({a} * {b})\n", str(a * b)
    else:
        who = rng.choice(NAMES).capitalize()
        code, out = f"print('hello {who}, {a}')\n", f"hello {who}, {a}"
    prompt = pick(
        rng,
        f"Run {name} and tell me what it prints.",
        f"What does {name} print?",
        f"Run {name} and report the output.",
        f"execute {name}",
    )
    return Generated(
        "run",
        prompt,
        {name: code},
        Check(answer_regex=re.escape(out)),
        [call("run_script", path=name)],
        f"{name} printed: {out}",
    )


def create(rng: random.Random) -> Generated:
    """A new file with the given text."""
    name = stem(rng) + ".txt"
    text = " ".join(rng.sample(WORDS, rng.randint(1, 3)))
    prompt = pick(
        rng,
        f"Create a file {name} containing {text}",
        f"Write {text} to a new file {name}",
        f"Make a file called {name} with the text {text}",
    )
    return Generated(
        "create",
        prompt,
        {},
        Check(files={name: rf"\s*{re.escape(text)}\s*"}),
        [call("write_file", path=name, content=text)],
        f"Created {name}.",
    )


def append(rng: random.Random) -> Generated:
    """A line added at the end of a file."""
    name = stem(rng) + ".txt"
    text = lines(rng, rng.randint(1, 4))
    line = rng.choice(WORDS)
    prompt = pick(
        rng,
        f"Append the line {line} to {name}",
        f"Add the line {line} at the end of {name}",
        f"add {line} as a new last line of {name}",
    )
    return Generated(
        "append",
        prompt,
        {name: text},
        Check(files={name: re.escape(text) + rf"\n*{line}\n?"}),
        [call("append_line", path=name, line=line)],
        f"Added {line} to {name}.",
    )


def replace(rng: random.Random) -> Generated:
    """One word replaced by another in a file."""
    name = stem(rng) + rng.choice([".txt", ".cfg"])
    old, new, keep = rng.sample(WORDS, 3)
    text = f"{keep} {old}\n"
    prompt = pick(
        rng,
        f"In {name}, replace the word {old} with {new}.",
        f"Replace {old} with {new} in {name}",
        f"change {old} to {new} in {name}",
    )
    return Generated(
        "replace",
        prompt,
        {name: text},
        Check(files={name: re.escape(f"{keep} {new}") + r"\n?"}),
        [call("replace_text", path=name, old=old, new=new)],
        f"Replaced {old} with {new}.",
    )


def fix(rng: random.Random) -> Generated:
    """A one-character bug in a Python function."""
    fn, good, bad = rng.choice([("add", "+", "-"), ("mul", "*", "+"), ("sub", "-", "+")])
    name = f"{fn}_{rng.choice(NAMES)}.py"
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    want = {"+": a + b, "*": a * b, "-": a - b}[good]
    module = name[:-3]
    prompt = f"Fix the bug in {name}: {fn}(a, b) should return a {good} b, not a {bad} b."
    check = Check(
        command=f"python3 -c 'from {module} import {fn}; assert {fn}({a}, {b}) == {want}'"
    )
    return Generated(
        "fix",
        prompt,
        {name: f"def {fn}(a, b):\n    return a {bad} b\n"},
        check,
        [call("replace_text", path=name, old=f"a {bad} b", new=f"a {good} b")],
        f"Fixed {name}.",
    )


def manage(rng: random.Random) -> Generated:
    """A file renamed, copied, deleted or moved into a folder."""
    taken: set[str] = set()
    name, other = stem(rng, taken) + ".txt", stem(rng, taken) + ".txt"
    text = " ".join(rng.sample(WORDS, 2)) + "\n"
    body = re.escape(text)
    what = rng.choice(["rename", "copy", "delete", "move"])
    if what == "rename":
        prompt = pick(rng, f"Rename {name} to {other}", f"rename the file {name} to {other}")
        return Generated(
            "manage",
            prompt,
            {name: text},
            Check(files={other: body}, absent=[name]),
            [call("move_file", path=name, to=other)],
            f"Renamed {name} to {other}.",
        )
    if what == "copy":
        prompt = pick(rng, f"Copy {name} to {other}", f"Make a copy of {name} called {other}")
        return Generated(
            "manage",
            prompt,
            {name: text},
            Check(files={name: body, other: body}),
            [call("copy_file", path=name, to=other)],
            f"Copied {name} to {other}.",
        )
    if what == "delete":
        prompt = pick(rng, f"Delete {name}", f"Remove the file {name}", f"delete {name} please")
        return Generated(
            "manage",
            prompt,
            {name: text, other: "keep\n"},
            Check(absent=[name], files={other: "keep\n"}),
            [call("delete_file", path=name)],
            f"Deleted {name}.",
        )
    folder = rng.choice(["old", "backup", "done", "store"])
    prompt = pick(rng, f"Move {name} into the {folder} folder.", f"Put {name} in {folder}/")
    return Generated(
        "manage",
        prompt,
        {name: text, f"{folder}/{other}": "x\n"},
        Check(files={f"{folder}/{name}": body}, absent=[name]),
        [call("move_file", path=name, to=f"{folder}/{name}")],
        f"Moved {name} to {folder}.",
    )


def mkdir(rng: random.Random) -> Generated:
    """A new folder, perhaps nested."""
    parts = rng.sample(["out", "cache", "assets", "logs", "tmp", "dist", "photos"], 2)
    path = parts[0] if rng.random() < 0.5 else "/".join(parts)
    prompt = pick(
        rng,
        f"Make a directory called {path}",
        f"Create the folder {path}",
        f"mkdir {path}",
    )
    return Generated(
        "mkdir",
        prompt,
        {},
        Check(command=f"test -d {path}"),
        [call("make_folder", path=path)],
        f"Created {path}.",
    )


def sort(rng: random.Random) -> Generated:
    """The lines of a file sorted into a new file."""
    name, out = stem(rng) + ".txt", rng.choice(["sorted", "ordered", "abc"]) + ".txt"
    items = rng.sample(NAMES, rng.randint(3, 6))
    text = "".join(f"{x}\n" for x in items)
    prompt = pick(
        rng,
        f"Sort the lines of {name} alphabetically and write them to {out}",
        f"Put the lines of {name} in alphabetical order in a new file {out}",
    )
    want = "".join(f"{x}\n" for x in sorted(items))
    return Generated(
        "sort",
        prompt,
        {name: text},
        Check(files={out: re.escape(want[:-1]) + r"\n?"}),
        [call("sort_lines", path=name, to=out)],
        f"Wrote the sorted lines to {out}.",
    )


def compare(rng: random.Random) -> Generated:
    """Two steps: which of two files has more lines."""
    taken: set[str] = set()
    a, b = stem(rng, taken) + ".txt", stem(rng, taken) + ".txt"
    na, nb = rng.sample(range(1, 9), 2)
    files = {a: lines(rng, na), b: lines(rng, nb)}
    longer = a if na > nb else b
    prompt = pick(rng, f"Which has more lines, {a} or {b}?", f"Does {a} or {b} have more lines?")
    return Generated(
        "compare",
        prompt,
        files,
        Check(answer_regex=re.escape(longer)),
        [call("count_lines", path=a), call("count_lines", path=b)],
        f"{longer} has more lines ({max(na, nb)}).",
    )


def chat(rng: random.Random) -> Generated:
    """A greeting or thanks, answered without any tool."""
    prompt, answer = rng.choice(
        [
            ("hi there!", "Hello! How can I help you today?"),
            ("good morning", "Good morning! What can I do for you?"),
            ("thank you, bye", "You are welcome. Goodbye!"),
            ("hey, what can you do?", "I can read, count, find and change files here."),
            ("thanks a lot!", "Glad to help!"),
        ]
    )
    return Generated("chat", prompt, {}, Check(answer_regex=r"\w", max_calls=0), [], answer)


BASIC_FAMILIES: dict[str, Generator] = {
    "count": count,
    "find": find,
    "value": value,
    "list": listing,
    "run": run,
    "create": create,
    "append": append,
    "replace": replace,
    "fix": fix,
    "manage": manage,
    "mkdir": mkdir,
    "sort": sort,
    "compare": compare,
    "chat": chat,
}


def _all_families() -> dict[str, Generator]:
    from cli.evals.generators.families_change import CHANGE_FAMILIES
    from cli.evals.generators.families_read import READ_FAMILIES

    return {**BASIC_FAMILIES, **READ_FAMILIES, **CHANGE_FAMILIES}


FAMILIES = _all_families()
