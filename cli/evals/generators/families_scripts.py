"""Generators of the script families (run with an argument, shell scripts, fix then run, output
to a file, python one-liners) and of the multi-step families (find then read, copy then edit,
list then count)."""

from __future__ import annotations

import random
import re

from cli.evals.generators.base import Generated, Generator, call, pick
from cli.evals.generators.words import NAMES, WORDS, lines, stem
from cli.evals.suite import Check

SCRIPTS = ("calc", "tool", "main", "show", "report", "greet", "convert", "check")
PRINT_TYPOS = ("prnt", "pirnt", "pritn", "printt", "Print")


def _printed(out: str) -> Check:
    """Every line of ``out``, in order, each standing alone (not part of a longer word)."""
    parts = [rf"(?<!\w){re.escape(x)}(?!\w)" for x in out.splitlines()]
    return Check(answer_regex="(?s)" + ".*".join(parts))


def _script(rng: random.Random) -> str:
    return rng.choice(SCRIPTS) + ".py"


def run_with_arg(rng: random.Random) -> Generated:
    """What a Python script prints for a command-line argument."""
    name = _script(rng)
    n, word = rng.randint(3, 60), rng.choice(WORDS)
    code, arg, out = rng.choice(
        [
            ("n = int(sys.argv[1])\nprint(n * n)\n", str(n), str(n * n)),
            ("n = int(sys.argv[1])\nprint(sum(range(1, n + 1)))\n", str(n), str(n * (n + 1) // 2)),
            ("print(sys.argv[1].upper() + '!')\n", word, word.upper() + "!"),
            ("print(sys.argv[1][::-1])\n", word, word[::-1]),
            ("print('Hello, ' + sys.argv[1].capitalize())\n", word, f"Hello, {word.capitalize()}"),
        ]
    )
    prompt = pick(
        rng,
        f"Run {name} with the argument {arg} and tell me what it prints.",
        f"What does {name} print for {arg}?",
        f"run {name} {arg}",
        f"Please execute {name} with {arg} as its argument and report the output.",
    )
    return Generated(
        "run-with-arg",
        prompt,
        {name: "import sys\n\n" + code},
        _printed(out),
        [call("run_command", command=f"python3 {name} {arg}")],
        f"{name} {arg} printed: {out}",
    )


def run_shell_script(rng: random.Random) -> Generated:
    """What a shell script prints."""
    name = rng.choice(["build", "hello", "setup", "count", "greet", "info"]) + ".sh"
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    who = rng.choice(NAMES).capitalize()
    items = rng.sample(WORDS, 3)
    body, out = rng.choice(
        [
            (f"a={a}\nb={b}\necho $((a * b))\n", str(a * b)),
            (f'name={who}\necho "Hello, $name"\n', f"Hello, {who}"),
            (f"for w in {' '.join(items)}; do\n  echo $w\ndone\n", "\n".join(items)),
            (f'echo "$(({a} + {b})) {items[0]}s"\n', f"{a + b} {items[0]}s"),
        ]
    )
    prompt = pick(
        rng,
        f"Run {name} and tell me what it prints.",
        f"What does the shell script {name} print?",
        f"execute {name} and show me the output",
        f"please run the script {name}",
    )
    return Generated(
        "run-shell-script",
        prompt,
        {name: "#!/bin/bash\n" + body},
        _printed(out),
        [call("run_script", path=name)],
        f"{name} printed: {out.replace(chr(10), ', ')}",
    )


def fix_and_run(rng: random.Random) -> Generated:
    """A misspelled print fixed, then the script run and its output reported."""
    name = _script(rng)
    bad = rng.choice(PRINT_TYPOS)
    a, b = rng.randint(2, 500), rng.randint(2, 500)
    label = rng.choice(["total", "sum", "result", "answer"])
    code = f"a = {a}\nb = {b}\n{{}}('{label}:', a + b)\n"
    out = f"{label}: {a + b}"
    prompt = pick(
        rng,
        f"Running {name} fails with NameError: name '{bad}' is not defined. "
        "Fix the typo and run it again: what does it give?",
        f"{name} has a typo: {bad} should be print. Fix it, then run it.",
        f"fix the typo in {name} ({bad} instead of print), then run it and tell me the result",
        f"Please fix the bug in {name}: {bad} should be print. Then run it.",
    )
    return Generated(
        "fix-and-run",
        prompt,
        {name: code.format(bad)},
        Check(answer_regex=rf"\b{re.escape(out)}\b", files={name: re.escape(code.format("print"))}),
        [call("replace_text", path=name, old=bad, new="print"), call("run_script", path=name)],
        f"Fixed {name}; it printed: {out}",
    )


def script_to_file(rng: random.Random) -> Generated:
    """A script's output saved to a file."""
    name = _script(rng)
    out_name = rng.choice(["out", "output", "result", "results"]) + ".txt"
    k, m = rng.randint(2, 5), rng.randint(2, 30)
    word, listed = rng.choice(WORDS), rng.sample(WORDS, rng.randint(2, 4))
    code, out = rng.choice(
        [
            (
                f"for n in range(1, {k + 1}):\n    print(n * {m})\n",
                "".join(f"{n * m}\n" for n in range(1, k + 1)),
            ),
            (
                f"for w in {listed!r}:\n    print(w.upper())\n",
                "".join(f"{w.upper()}\n" for w in listed),
            ),
            (f"print('{word}' * {k})\nprint({m} + {k})\n", f"{word * k}\n{m + k}\n"),
        ]
    )
    prompt = pick(
        rng,
        f"Run {name} and save its output to {out_name}",
        f"Save what {name} prints in {out_name}.",
        f"run {name} and write the output into {out_name}",
        f"Please store the output of {name} in a file called {out_name}.",
    )
    return Generated(
        "script-to-file",
        prompt,
        {name: code},
        Check(files={out_name: re.escape(out)}),
        [call("run_command", command=f"python3 {name} > {out_name}")],
        f"Saved the output of {name} to {out_name}.",
    )


def python_oneliner(rng: random.Random) -> Generated:
    """A question about text in the prompt, answered with a python one-liner."""
    kind = rng.choice(["reverse", "length", "letter", "sort"])
    if kind == "reverse":
        text = rng.choice([rng.choice(WORDS), " ".join(rng.sample(WORDS, 2))])
        want = text[::-1]
        program = f'print("{text}"[::-1])'
        prompt = pick(
            rng,
            f"Use python to reverse the string '{text}'.",
            f"What is '{text}' spelled backwards? Compute it with python.",
            f"reverse '{text}' with a python one-liner",
            f"Please print '{text}' reversed, using python3.",
        )
        check, answer = rf"(?<!\w){re.escape(want)}(?!\w)", f"Reversed, it is: {want}"
    elif kind == "length":
        text = " ".join(rng.sample(WORDS, rng.randint(2, 3)))
        want = str(len(text))
        program = f'print(len("{text}"))'
        prompt = pick(
            rng,
            f"What is the length of the string '{text}'?",
            f"how many characters are in '{text}'? use python",
            f"Compute the length of '{text}' with python.",
            f"count the characters in the text '{text}', spaces included",
        )
        check, answer = rf"\b{want}\b", f"'{text}' is {want} characters long."
    elif kind == "letter":
        text = " ".join(rng.sample(WORDS, rng.randint(2, 3)))
        letter = rng.choice([c for c in text if c != " " and text.count(c) > 1])
        want = str(text.count(letter))
        program = f'print("{text}".count("{letter}"))'
        prompt = pick(
            rng,
            f"Use python to count how often the letter {letter} occurs in '{text}'.",
            f"how many times does the letter {letter} appear in '{text}'? compute it with python",
            f"Count the letter {letter} in '{text}' with a python one-liner.",
        )
        check, answer = rf"\b{want}\b", f"The letter {letter} occurs {want} times in '{text}'."
    else:
        items = rng.sample(WORDS + NAMES, rng.randint(3, 5))
        while items == sorted(items):
            rng.shuffle(items)
        want_items = sorted(items)
        program = f"print(sorted({items!r}))".replace("'", '"')
        prompt = pick(
            rng,
            f"Sort these words alphabetically with python: {', '.join(items)}",
            f"use python3 to put {' '.join(items)} in alphabetical order",
            f"Please sort {', '.join(items)} in order with a python one-liner.",
        )
        check = "(?s)" + ".*".join(rf"\b{w}\b" for w in want_items)
        answer = f"In order: {', '.join(want_items)}."
    return Generated(
        "python-oneliner",
        prompt,
        {},
        Check(answer_regex=check),
        [call("run_command", command=f"python3 -c '{program}'")],
        answer,
    )


def find_then_read(rng: random.Random) -> Generated:
    """Two steps: find the file that mentions a project, then read a value from it."""
    taken: set[str] = set()
    names = [stem(rng, taken) + ".txt" for _ in range(3)]
    projects = rng.sample(WORDS, 3)
    owners = rng.sample(NAMES, 3)
    budgets = rng.sample(range(100, 9999), 3)
    files = {
        n: f"project: {p}\nowner: {o}\nbudget: {b}\n"
        for n, p, o, b in zip(names, projects, owners, budgets, strict=True)
    }
    i = rng.randrange(3)
    target, project = names[i], projects[i]
    field, want = rng.choice([("owner", owners[i]), ("budget", str(budgets[i]))])
    prompt = pick(
        rng,
        f"Find the file that mentions {project} and read me its {field}.",
        f"Which file talks about {project}? Read it and tell me the {field}.",
        f"search the files for {project}, then show me the {field} in that file",
        f"One file mentions the {project} project: read the {field} from it.",
    )
    return Generated(
        "find-then-read",
        prompt,
        files,
        Check(answer_regex=rf"\b{want}\b"),
        [call("find_text", text=project), call("read_file", path=target)],
        f"{target} mentions {project}; its {field} is {want}.",
    )


def copy_then_edit(rng: random.Random) -> Generated:
    """Two steps: copy a file, then change a word in the copy only."""
    taken: set[str] = set()
    name = stem(rng, taken) + ".txt"
    copy = rng.choice([stem(rng, taken), name[:-4] + "_copy", name[:-4] + "2"]) + ".txt"
    old, new = rng.sample(WORDS, 2)
    body = [
        " ".join(rng.sample([w for w in WORDS if old not in w], 2))
        for _ in range(rng.randint(1, 3))
    ]
    body.insert(rng.randint(0, len(body)), f"{old} {rng.choice(NAMES)}")
    text = "".join(f"{x}\n" for x in body)
    prompt = pick(
        rng,
        f"Copy {name} to {copy}, then change {old} to {new} in the copy.",
        f"Make a copy of {name} called {copy} and change {old} to {new} in {copy}.",
        f"copy {name} as {copy}; in {copy}, replace the word {old} by {new}",
        f"Please duplicate {name} to {copy} and then edit {copy} so that {old} becomes {new}.",
    )
    return Generated(
        "copy-then-edit",
        prompt,
        {name: text},
        Check(files={name: re.escape(text), copy: re.escape(text.replace(old, new))}),
        [call("copy_file", path=name, to=copy), call("replace_text", path=copy, old=old, new=new)],
        f"Copied {name} to {copy} and replaced {old} with {new} in the copy.",
    )


def list_then_count(rng: random.Random) -> Generated:
    """Two steps: list a folder, then say how many files it holds."""
    folder = rng.choice(["docs", "photos", "reports", "data", "inbox", "notes", "archive"])
    taken: set[str] = set()
    n = rng.randint(2, 7)
    files = {
        f"{folder}/{stem(rng, taken)}{rng.choice(['.txt', '.md', '.csv'])}": lines(rng, 1)
        for _ in range(n)
    }
    outside = rng.choice([k for k in range(1, 5) if k != n])
    files |= {stem(rng, taken) + ".txt": "x\n" for _ in range(outside)}
    prompt = pick(
        rng,
        f"List the {folder} folder and tell me how many files it holds.",
        f"list the files in {folder}, then tell me how many there are",
        f"How many files are listed in the {folder} folder?",
        f"Please list {folder}/ and count its files.",
        f"List the contents of the {folder} directory: how many files are in it?",
    )
    return Generated(
        "list-then-count",
        prompt,
        files,
        Check(answer_regex=rf"\b{n}\b"),
        [call("list_files", folder=folder)],
        f"The {folder} folder holds {n} files.",
    )


SCRIPT_FAMILIES: dict[str, Generator] = {
    "run-with-arg": run_with_arg,
    "run-shell-script": run_shell_script,
    "fix-and-run": fix_and_run,
    "script-to-file": script_to_file,
    "python-oneliner": python_oneliner,
    "find-then-read": find_then_read,
    "copy-then-edit": copy_then_edit,
    "list-then-count": list_then_count,
}
