"""Generators of the editing and file-management families: lines deleted or inserted, case
changed, duplicates removed, files moved, copied, emptied, made and removed."""

from __future__ import annotations

import random
import re

from cli.evals.generators.base import Generated, Generator, call, pick
from cli.evals.generators.words import NAMES, STEMS, WORDS, lines, stem
from cli.evals.suite import Check

# An extension and the folders its files are gathered into.
KINDS = (
    ("jpg", ("photos", "images", "pictures")),
    ("png", ("images", "screenshots")),
    ("log", ("logs", "archive")),
    ("md", ("docs", "notes")),
    ("pdf", ("papers", "docs")),
    ("mp3", ("music", "songs")),
)


def _exact(text: str) -> str:
    return re.escape(text)


def _lines_without(rng: random.Random, n: int, word: str) -> list[str]:
    """``n`` lines of words, none of which holds ``word``."""
    pool = [w for w in WORDS if word not in w and w not in word]
    return [" ".join(rng.sample(pool, rng.randint(1, 3))) for _ in range(n)]


def _text_file(rng: random.Random, taken: set[str] | None = None) -> str:
    return stem(rng, taken) + rng.choice([".txt", ".txt", ".md", ".log"])


def delete_matching_lines(rng: random.Random) -> Generated:
    """Every line that holds a word deleted from a file."""
    name = _text_file(rng)
    word = rng.choice(WORDS)
    kept = _lines_without(rng, rng.randint(2, 5), word)
    hit = [
        " ".join([*rng.sample(kept[0].split(), 1), word][:: rng.choice([1, -1])])
        for _ in range(rng.randint(2, 3))
    ]
    all_lines = kept + hit
    rng.shuffle(all_lines)
    prompt = pick(
        rng,
        f"Delete every line of {name} that contains {word}.",
        f"Remove the lines with {word} from {name}",
        f"in {name}, delete all lines mentioning {word}",
        f"Please drop the lines containing {word} from {name}.",
    )
    want = "".join(f"{x}\n" for x in all_lines if word not in x)
    return Generated(
        "delete-matching-lines",
        prompt,
        {name: "".join(f"{x}\n" for x in all_lines)},
        Check(files={name: _exact(want)}),
        [call("run_command", command=f"sed -i '/{word}/d' {name}")],
        f"Done: deleted the lines of {name} that contain {word}.",
    )


def insert_first_line(rng: random.Random) -> Generated:
    """A line added at the top of a file."""
    name = _text_file(rng)
    text = lines(rng, rng.randint(2, 5))
    line = rng.choice(
        [
            f"{name.split('.')[0].capitalize()} of {rng.choice(NAMES)}",
            f"# {rng.choice(WORDS)} {rng.choice(WORDS)}",
            rng.choice(WORDS).upper(),
        ]
    )
    prompt = pick(
        rng,
        f"Add the line {line} at the top of {name}",
        f"Insert {line} as the first line of {name}.",
        f"put the line {line} at the start of {name}",
        f"Please add {line} as a new first line in {name}.",
    )
    return Generated(
        "insert-first-line",
        prompt,
        {name: text},
        Check(files={name: _exact(f"{line}\n{text}")}),
        [call("run_command", command=f"sed -i '1i {line}' {name}")],
        f"Done: {name} now starts with {line}.",
    )


def _case_change(rng: random.Random, upper: bool) -> Generated:
    taken: set[str] = set()
    name = stem(rng, taken) + ".txt"
    target = rng.choice([stem(rng, taken), name.split(".")[0] + ("_upper" if upper else "_lower")])
    target += ".txt"

    def mixed(word: str) -> str:
        return rng.choice([word, word.capitalize(), word.upper()])

    text = "".join(
        " ".join(mixed(w) for w in rng.sample(WORDS, rng.randint(1, 4))) + "\n"
        for _ in range(rng.randint(2, 4))
    )
    if upper:
        family, want, command = "uppercase-file", text.upper(), "tr a-z A-Z"
        prompt = pick(
            rng,
            f"Write the text of {name} in capital letters to {target}",
            f"Make an uppercase version of {name} called {target}.",
            f"convert the file {name} to upper case and save it as {target}",
            f"Please put {name} in all caps into a new file {target}.",
        )
    else:
        family, want, command = "lowercase-file", text.lower(), "tr A-Z a-z"
        prompt = pick(
            rng,
            f"Write the text of {name} in small letters to {target}",
            f"Make a lowercase version of {name} called {target}.",
            f"convert the file {name} to lower case and save it as {target}",
            f"Please put {name} in all lowercase into a new file {target}.",
        )
    return Generated(
        family,
        prompt,
        {name: text},
        Check(files={name: _exact(text), target: _exact(want)}),
        [call("run_command", command=f"{command} < {name} > {target}")],
        f"Wrote {name} in {'capitals' if upper else 'small letters'} to {target}.",
    )


def uppercase_file(rng: random.Random) -> Generated:
    """A file's text in capitals, written to another file."""
    return _case_change(rng, upper=True)


def lowercase_file(rng: random.Random) -> Generated:
    """A file's text in small letters, written to another file."""
    return _case_change(rng, upper=False)


def dedupe_lines(rng: random.Random) -> Generated:
    """Repeated lines removed from a file in place; the order may change (sorted)."""
    name = stem(rng) + ".txt"
    unique = rng.sample(NAMES if rng.random() < 0.5 else WORDS, rng.randint(3, 6))
    repeated = unique + rng.sample(unique, rng.randint(1, len(unique) - 1))
    rng.shuffle(repeated)
    prompt = pick(
        rng,
        f"Remove the duplicate lines from {name}; the order does not matter.",
        f"Delete repeated lines in {name} so each line appears once (sorted is fine).",
        f"dedupe {name} in place, any order is ok",
        f"Please get rid of duplicate lines in {name}. Sorting the file is fine.",
    )
    expected = sorted(set(unique))
    # Any order passes: the check compares the sorted lines, each of which must appear once.
    check = (
        "python3 -c \"import sys; sys.exit(sorted(open('"
        + name
        + f"').read().splitlines()) != {expected!r})\""
    )
    return Generated(
        "dedupe-lines",
        prompt,
        {name: "".join(f"{x}\n" for x in repeated)},
        Check(command=check),
        [call("run_command", command=f"sort -u {name} -o {name}")],
        f"Done: {name} now holds each line once (sorted).",
    )


def replace_all_files(rng: random.Random) -> Generated:
    """A word replaced by another in every .txt file, and nowhere else."""
    old, new = rng.sample(WORDS, 2)
    taken: set[str] = set()
    names = [stem(rng, taken) + ".txt" for _ in range(rng.randint(2, 4))]
    files = {}
    for n in names:
        body = _lines_without(rng, rng.randint(1, 3), old)
        body.insert(rng.randint(0, len(body)), f"{rng.choice(WORDS)} {old}")
        files[n] = "".join(f"{x}\n" for x in body)
    other = stem(rng, taken) + ".md"
    files[other] = f"{old} stays here\n"
    prompt = pick(
        rng,
        f"Replace {old} with {new} in every .txt file.",
        f"change {old} to {new} in all the .txt files",
        f"In all .txt files here, replace the word {old} by {new}.",
        f"Please swap {old} for {new} in each .txt file.",
    )
    want = {n: _exact(t.replace(old, new)) for n, t in files.items() if n.endswith(".txt")}
    return Generated(
        "replace-all-files",
        prompt,
        files,
        Check(files={**want, other: _exact(files[other])}),
        [call("run_command", command=f"sed -i 's/{old}/{new}/g' *.txt")],
        f"Done: replaced {old} with {new} in {', '.join(sorted(names))}.",
    )


def write_multiline(rng: random.Random) -> Generated:
    """A new file holding several given lines."""
    name = stem(rng) + rng.choice([".txt", ".md"])
    items = rng.sample(NAMES if rng.random() < 0.5 else WORDS, rng.randint(3, 5))
    listed = ", ".join(items[:-1]) + f" and {items[-1]}"
    prompt = pick(
        rng,
        f"Create {name} with the lines {listed}.",
        f"Write a file {name} with these lines: {' / '.join(items)}",
        f"create a new file {name} with one line each for {listed}",
        f"Please write {', '.join(items)} to {name}, one per line.",
    )
    text = "\n".join(items)
    return Generated(
        "write-multiline",
        prompt,
        {},
        Check(files={name: _exact(text) + r"\n?"}),
        [call("write_file", path=name, content=text)],
        f"Wrote {len(items)} lines to {name}.",
    )


def _by_pattern(rng: random.Random, move: bool) -> Generated:
    (ext, folders), (other_ext, _) = rng.sample(KINDS, 2)
    folder = rng.choice(folders)
    taken: set[str] = set()
    matching = [f"{stem(rng, taken)}.{ext}" for _ in range(rng.randint(2, 4))]
    others = [f"{stem(rng, taken)}.{other_ext}" for _ in range(rng.randint(1, 2))]
    kept = f"{folder}/{stem(rng, taken)}.txt"
    body = {n: f"{rng.choice(WORDS)} {n}\n" for n in [*matching, *others]}
    files = {**body, kept: "already here\n"}
    landed = {f"{folder}/{n}": _exact(body[n]) for n in matching}
    stay = {n: _exact(body[n]) for n in others}
    if move:
        family, verb, command = "move-by-pattern", "Moved", "mv"
        prompt = pick(
            rng,
            f"Move all the .{ext} files into {folder}/",
            f"Put every .{ext} file in the {folder} folder.",
            f"move the {ext} files to {folder}",
            f"Please move *.{ext} into the {folder} directory.",
        )
        check = Check(files={**landed, **stay}, absent=matching)
    else:
        family, verb, command = "copy-by-pattern", "Copied", "cp"
        prompt = pick(
            rng,
            f"Copy all the .{ext} files into {folder}/",
            f"Put a copy of every .{ext} file in the {folder} folder.",
            f"copy the {ext} files to {folder}",
            f"Please copy *.{ext} into the {folder} directory.",
        )
        originals = {n: _exact(body[n]) for n in matching}
        check = Check(files={**landed, **stay, **originals})
    return Generated(
        family,
        prompt,
        files,
        check,
        [call("run_command", command=f"{command} *.{ext} {folder}/")],
        f"{verb} {', '.join(sorted(matching))} into {folder}.",
    )


def move_by_pattern(rng: random.Random) -> Generated:
    """The files matching a pattern moved into a folder."""
    return _by_pattern(rng, move=True)


def copy_by_pattern(rng: random.Random) -> Generated:
    """The files matching a pattern copied into a folder."""
    return _by_pattern(rng, move=False)


def empty_file(rng: random.Random) -> Generated:
    """A file emptied, kept in place."""
    taken: set[str] = set()
    name = stem(rng, taken) + rng.choice([".log", ".txt", ".md"])
    other = stem(rng, taken) + ".txt"
    files = {name: lines(rng, rng.randint(2, 6)), other: lines(rng, 2)}
    prompt = pick(
        rng,
        f"Empty the file {name}.",
        f"Clear the contents of {name} but keep the file.",
        f"make the file {name} empty",
        f"Please erase all the text in {name}, keeping the file itself.",
    )
    return Generated(
        "empty-file",
        prompt,
        files,
        Check(files={name: "", other: _exact(files[other])}),
        [call("run_command", command=f"truncate -s 0 {name}")],
        f"Done: {name} is now empty.",
    )


def touch_file(rng: random.Random) -> Generated:
    """A new, empty file."""
    taken: set[str] = set()
    name = rng.choice(
        [stem(rng, taken) + ".txt", stem(rng, taken) + ".log", "done.flag", ".gitkeep", "README.md"]
    )
    other = stem(rng, taken) + ".txt"
    prompt = pick(
        rng,
        f"Create an empty file called {name}",
        f"Make a new empty file named {name}.",
        f"touch the file {name}",
        f"Please create {name} with nothing in it.",
    )
    return Generated(
        "touch-file",
        prompt,
        {other: "x\n"},
        Check(files={name: ""}),
        [call("run_command", command=f"touch {name}")],
        f"Created the empty file {name}.",
    )


def delete_folder(rng: random.Random) -> Generated:
    """A folder removed with everything in it."""
    folder, keep = rng.sample(["old", "tmp", "cache", "build", "drafts", "trash", "scratch"], 2)
    taken: set[str] = set()
    files = {f"{folder}/{stem(rng, taken)}.txt": lines(rng, 1) for _ in range(rng.randint(1, 3))}
    if rng.random() < 0.5:
        files[f"{folder}/{rng.choice(STEMS)}/{stem(rng, taken)}.md"] = "x\n"
    kept = f"{keep}/{stem(rng, taken)}.txt"
    files[kept] = "keep me\n"
    prompt = pick(
        rng,
        f"Delete the folder {folder} and everything in it.",
        f"Remove the {folder} directory with all its files",
        f"delete {folder}/ completely, files included",
        f"Please remove the whole {folder} folder.",
    )
    return Generated(
        "delete-folder",
        prompt,
        files,
        Check(absent=[folder], files={kept: "keep me\n"}),
        [call("run_command", command=f"rm -r {folder}")],
        f"Done: removed the folder {folder}.",
    )


EDITING_FAMILIES: dict[str, Generator] = {
    "delete-matching-lines": delete_matching_lines,
    "insert-first-line": insert_first_line,
    "uppercase-file": uppercase_file,
    "dedupe-lines": dedupe_lines,
    "replace-all-files": replace_all_files,
    "lowercase-file": lowercase_file,
    "write-multiline": write_multiline,
    "move-by-pattern": move_by_pattern,
    "copy-by-pattern": copy_by_pattern,
    "empty-file": empty_file,
    "touch-file": touch_file,
    "delete-folder": delete_folder,
}
