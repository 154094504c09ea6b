"""Generators of the curriculum's searching families: files by name or by content, lines by a
word, empty files and folders. A word occurs on some lines and in some files only, so that
naming everything is as wrong as naming nothing.
"""

from __future__ import annotations

import random

from cli.evals.generators.base import Generated, Generator, call, pick
from cli.evals.generators.families_shared import (
    FOLDERS,
    body,
    distinct_lines,
    has,
    number,
    shell,
    text_name,
)
from cli.evals.generators.words import WORDS, lines, stem


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
    return shell(
        "find-by-name",
        prompt,
        dict.fromkeys(found + rest, "x\n"),
        has([p.split("/")[-1] for p in found], [p.split("/")[-1] for p in rest]),
        f"find . -name '*{ext}'",
        f"The {ext} files are: {', '.join('./' + p for p in sorted(found))}",
    )


def _with_word(rng: random.Random, word: str, n: int, hits: int) -> tuple[list[str], list[int]]:
    """``n`` distinct lines, ``hits`` of them holding ``word`` once (as ``word`` itself)."""
    while True:
        rows = distinct_lines(rng, n, [w for w in WORDS if w != word])
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
    name, word = text_name(rng), rng.choice(WORDS)
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
    return shell(
        "grep-lines",
        prompt,
        {name: body(rows)},
        has(found, [r for r in rows if r not in found]),
        f"grep {word} {name}",
        f"The lines of {name} with {word} are:\n{shown}",
    )


def grep_line_number(rng: random.Random) -> Generated:
    """The number of the line a word is on (never line 1)."""
    name, word = text_name(rng), rng.choice(WORDS)
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
    return shell(
        "grep-line-number",
        prompt,
        {name: body(rows)},
        number(n),
        f"grep -n {word} {name}",
        f"{word} is on line {n} of {name}.",
    )


def files_with_word(rng: random.Random) -> Generated:
    """Every file that contains a word (two or three do); ``find_text`` names them all."""
    taken: set[str] = set()
    word, *others = rng.sample(WORDS, 10)
    paths = [text_name(rng, taken) for _ in range(rng.randint(4, 5))]
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
        has([p.split("/")[-1] for p in shown], [p.split("/")[-1] for p in paths if p not in found]),
        [call("find_text", text=word)],
        f"{word} is in {', '.join(shown)}.",
    )


def empty_files(rng: random.Random) -> Generated:
    """Which files are empty."""
    taken: set[str] = set()
    paths = [text_name(rng, taken) for _ in range(rng.randint(4, 6))]
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
    return shell(
        "empty-files",
        prompt,
        files,
        has([p.split("/")[-1] for p in shown], [p.split("/")[-1] for p in paths if p not in empty]),
        "find . -type f -empty",
        f"The empty files are: {', '.join('./' + p for p in shown)}",
    )


def list_subfolders(rng: random.Random) -> Generated:
    """The folders of the workspace, a nested one among them."""
    taken: set[str] = set()
    tops = rng.sample(FOLDERS, rng.randint(2, 3))
    nested = f"{tops[0]}/{rng.choice([f for f in FOLDERS if f not in tops])}"
    folders = [*tops, nested]
    files = {f"{f}/{text_name(rng, taken)}": "x\n" for f in folders}
    files.update({text_name(rng, taken): "x\n" for _ in range(rng.randint(1, 2))})
    prompt = pick(
        rng,
        "What folders are in the workspace, subfolders included?",
        "List all the folders here, nested ones too.",
        "which directories are there, including subfolders?",
        "Show me every folder and subfolder.",
        "Please list every directory in the workspace, nested ones included.",
    )
    shown = sorted(folders)
    return shell(
        "list-subfolders",
        prompt,
        files,
        has(folders, [p.split("/")[-1] for p in files]),
        "find . -mindepth 1 -type d",
        f"The folders are: {', '.join('./' + f for f in shown)}",
    )


def grep_ignore_case(rng: random.Random) -> Generated:
    """The lines of a file with a word in any letter case."""
    name, word = text_name(rng), rng.choice(WORDS)
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
    return shell(
        "grep-ignore-case",
        prompt,
        {name: body(rows)},
        has(found, [r for r in rows if r not in found]),
        f"grep -i {word} {name}",
        f"The lines of {name} with {word} in any case are:\n{shown}",
    )


SEARCHING_FAMILIES: dict[str, Generator] = {
    "find-by-name": find_by_name,
    "grep-lines": grep_lines,
    "grep-line-number": grep_line_number,
    "files-with-word": files_with_word,
    "empty-files": empty_files,
    "list-subfolders": list_subfolders,
    "grep-ignore-case": grep_ignore_case,
}
