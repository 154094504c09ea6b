"""Generators of the structured-file families: reading and changing JSON, TOML, YAML, CSV, .env
and INI files."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence

from cli.evals.generators.base import Generated, Generator, call, pick
from cli.evals.generators.words import NAMES, WORDS
from cli.evals.suite import Check

SECTIONS = ("server", "database", "cache", "auth", "logging", "queue", "mail", "backup")
NUMBER_KEYS = ("port", "timeout", "retries", "workers", "limit", "delay")
WORD_KEYS = ("host", "user", "region", "level", "owner", "theme")
LIST_KEYS = ("items", "users", "tasks", "tags", "hosts", "members")
CITIES = ("paris", "lima", "oslo", "rome", "cairo", "tokyo", "quito", "dakar", "hanoi", "bern")


def _exactly(value: object) -> Check:
    return Check(answer_regex=rf"\b{re.escape(str(value))}\b")


def _all_of(*names: str) -> Check:
    return Check(answer_regex="(?s)" + "".join(rf"(?=.*\b{re.escape(n)}\b)" for n in names))


def _json_file(rng: random.Random) -> str:
    return rng.choice(["config", "settings", "app", "service", "options"]) + ".json"


def _settings(rng: random.Random, keys: list[str]) -> dict[str, int | str]:
    """A value for each key: a number for a numeric key, a word for any other."""
    numbers = iter(rng.sample(range(2, 9999), len(keys)))
    words = iter(rng.sample(WORDS, len(keys)))
    return {k: next(numbers) if k in NUMBER_KEYS else next(words) for k in keys}


def _json_set_command(name: str, key: str, value: int | str) -> str:
    """The one canonical command that sets a key of a JSON object in place."""
    program = (
        f'import json; d=json.load(open("{name}")); d["{key}"]={json.dumps(value)}; '
        f'json.dump(d, open("{name}","w"), indent=2)'
    )
    return f"python3 -c '{program}'"


def _json_equals(name: str, data: dict[str, int | str]) -> Check:
    return Check(
        command=f"python3 -c \"import json, sys; sys.exit(json.load(open('{name}')) != {data!r})\""
    )


def json_nested_value(rng: random.Random) -> Generated:
    """A value inside a section of a JSON file."""
    name = _json_file(rng)
    sections = rng.sample(SECTIONS, 3)
    keys = [*rng.sample(NUMBER_KEYS, 2), rng.choice(WORD_KEYS)]
    numbers = iter(rng.sample(range(2, 9999), 9))
    words = iter(rng.sample(WORDS, 3))
    data = {
        s: {k: next(numbers) if k in NUMBER_KEYS else next(words) for k in keys} for s in sections
    }
    section, key = rng.choice(sections), rng.choice(keys)
    want = data[section][key]
    prompt = pick(
        rng,
        f"What is the {key} of the {section} in {name}?",
        f"In {name}, what is {section}.{key}?",
        f"what's the {section} {key} set to in {name}",
        f"Please look up the {key} under {section} in {name}.",
        f"Read the {key} of {section} from {name}.",
    )
    program = f'import json; print(json.load(open("{name}"))["{section}"]["{key}"])'
    return Generated(
        "json-nested-value",
        prompt,
        {name: json.dumps(data, indent=2) + "\n"},
        _exactly(want),
        [call("run_command", command=f"python3 -c '{program}'")],
        f"The {key} of {section} in {name} is {want}.",
    )


def json_list_length(rng: random.Random) -> Generated:
    """How many items a list in a JSON file holds."""
    name = _json_file(rng)
    key, other = rng.sample(LIST_KEYS, 2)
    n, m = rng.sample(range(2, 10), 2)
    data = {
        "name": rng.choice(NAMES),
        key: rng.sample(WORDS, n),
        other: rng.sample(WORDS, m),
    }
    prompt = pick(
        rng,
        f"How many {key} are in {name}?",
        f"How many entries does the {key} list in {name} have?",
        f"count the {key} in {name}",
        f"What is the length of the {key} list in {name}?",
        f"Please tell me how many {key} {name} lists.",
    )
    program = f'import json; print(len(json.load(open("{name}"))["{key}"]))'
    return Generated(
        "json-list-length",
        prompt,
        {name: json.dumps(data, indent=2) + "\n"},
        Check(answer_regex=rf"\b{n}\b"),
        [call("run_command", command=f"python3 -c '{program}'")],
        f"The {key} list in {name} has {n} items.",
    )


def json_keys(rng: random.Random) -> Generated:
    """The top-level keys of a JSON object."""
    name = _json_file(rng)
    keys = rng.sample(NUMBER_KEYS + WORD_KEYS, rng.randint(3, 5))
    data: dict[str, object] = dict(_settings(rng, keys))
    nested = rng.choice(SECTIONS)
    data[nested] = {"enabled": True, "path": "/" + rng.choice(WORDS)}
    keys.append(nested)
    prompt = pick(
        rng,
        f"What keys does {name} have?",
        f"List the top-level keys of {name}.",
        f"which keys are in {name}?",
        f"Show me the keys of the object in {name}.",
        f"Please tell me the names of the keys in {name}",
    )
    program = f'import json; print(list(json.load(open("{name}"))))'
    return Generated(
        "json-keys",
        prompt,
        {name: json.dumps(data, indent=2) + "\n"},
        _all_of(*keys),
        [call("run_command", command=f"python3 -c '{program}'")],
        f"The keys of {name} are: {', '.join(keys)}.",
    )


def toml_value(rng: random.Random) -> Generated:
    """A value in a [section] of a TOML file."""
    name = rng.choice(["config", "app", "settings", "deploy", "project"]) + ".toml"
    sections = rng.sample(SECTIONS, rng.randint(2, 3))
    keys = rng.sample(NUMBER_KEYS + WORD_KEYS, 2 * len(sections))
    values = _settings(rng, keys)
    owner = {k: sections[i // 2] for i, k in enumerate(keys)}
    text = "\n".join(
        f"[{s}]\n"
        + "".join(
            f"{k} = {values[k]}\n" if k in NUMBER_KEYS else f'{k} = "{values[k]}"\n'
            for k in keys
            if owner[k] == s
        )
        for s in sections
    )
    key = rng.choice(keys)
    section, want = owner[key], values[key]
    prompt = pick(
        rng,
        f"What is the {key} in the [{section}] section of {name}?",
        f"In {name}, what is {key} under [{section}]?",
        f"what's {section}.{key} in {name}",
        f"Look up the {key} of {section} in {name}.",
        f"Please read the {section} {key} from {name}.",
    )
    return Generated(
        "toml-value",
        prompt,
        {name: text},
        _exactly(want),
        [call("read_file", path=name)],
        f"The {key} in [{section}] of {name} is {want}.",
    )


def _people(rng: random.Random, n: int) -> list[tuple[str, int, str]]:
    """CSV rows of name, age, city: names and ages all different, cities repeating."""
    names = rng.sample(NAMES, n)
    ages = rng.sample(range(18, 80), n)
    return [(names[i], ages[i], rng.choice(CITIES)) for i in range(n)]


def _csv(header: str, rows: Sequence[Sequence[object]]) -> str:
    return header + "\n" + "".join(",".join(str(v) for v in row) + "\n" for row in rows)


def csv_lookup(rng: random.Random) -> Generated:
    """One cell of a CSV file, found by the name in its first column."""
    name = rng.choice(["people", "staff", "team", "members", "guests"]) + ".csv"
    rows = _people(rng, rng.randint(3, 6))
    who, age, city = rng.choice(rows)
    column, want = rng.choice([("age", age), ("city", city)])
    prompt = pick(
        rng,
        f"In the file {name}, what is {who}'s {column}?",
        f"Look up the {column} of {who} in {name}.",
        f"What {column} does the row for {who} in {name} show?",
        f"find {who}'s {column} in the CSV file {name}",
        f"Please look up {who} in {name} and tell me the {column}.",
    )
    return Generated(
        "csv-lookup",
        prompt,
        {name: _csv("name,age,city", rows)},
        _exactly(want),
        [call("run_command", command=f"grep '^{who},' {name}")],
        f"The {column} of {who} in {name} is {want}.",
    )


def json_set_value(rng: random.Random) -> Generated:
    """A value of a JSON object changed in place."""
    name = _json_file(rng)
    keys = rng.sample(NUMBER_KEYS + WORD_KEYS, rng.randint(3, 5))
    data = _settings(rng, keys)
    key = rng.choice(keys)
    old = data[key]
    new: int | str = (
        rng.choice([v for v in range(2, 9999) if v != old])
        if isinstance(old, int)
        else rng.choice([w for w in WORDS if w != old])
    )
    prompt = pick(
        rng,
        f"Set {key} to {new} in {name}.",
        f"Change the {key} in {name} to {new}",
        f"in {name}, make {key} {new}",
        f"Please update {name} so that {key} is {new}.",
        f"Edit {name}: the {key} should be {new}.",
    )
    want = {**data, key: new}
    return Generated(
        "json-set-value",
        prompt,
        {name: json.dumps(data, indent=2) + "\n"},
        _json_equals(name, want),
        [call("run_command", command=_json_set_command(name, key, new))],
        f"Done: {key} is now {new} in {name}.",
    )


def json_add_key(rng: random.Random) -> Generated:
    """A new key added to a JSON object."""
    name = _json_file(rng)
    keys = rng.sample(NUMBER_KEYS + WORD_KEYS, rng.randint(3, 5))
    data = _settings(rng, keys[:-1])
    key = keys[-1]
    value = _settings(rng, [key])[key]
    prompt = pick(
        rng,
        f"Add the key {key} with the value {value} to {name}.",
        f"add {key} = {value} to the object in {name}",
        f"Please add a new setting {key} set to {value} in {name}.",
        f"Put a key {key} with value {value} into {name}",
    )
    return Generated(
        "json-add-key",
        prompt,
        {name: json.dumps(data, indent=2) + "\n"},
        _json_equals(name, {**data, key: value}),
        [call("run_command", command=_json_set_command(name, key, value))],
        f"Done: added {key} ({value}) to {name}.",
    )


def _env(rng: random.Random) -> tuple[list[str], dict[str, int | str]]:
    keys = rng.sample(NUMBER_KEYS + WORD_KEYS, rng.randint(3, 5))
    values = _settings(rng, keys)
    return [k.upper() for k in keys], {k.upper(): v for k, v in values.items()}


def _env_text(values: dict[str, int | str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


def _other_value(rng: random.Random, old: int | str) -> int | str:
    """A new value for a setting of a text config file: of ``old``'s kind, never ``old``."""
    new = rng.randint(2, 9999) if isinstance(old, int) else rng.choice(WORDS)
    return f"{new}2" if new == old else new


def env_set_value(rng: random.Random) -> Generated:
    """A variable of a .env file given a new value."""
    name = rng.choice([".env", ".env", ".env.local"])
    keys, values = _env(rng)
    key = rng.choice(keys)
    new = _other_value(rng, values[key])
    prompt = pick(
        rng,
        f"Set {key} to {new} in {name}",
        f"Change {key} in {name} to {new}.",
        f"in the file {name}, make {key} equal {new}",
        f"Please update {name} so that {key} is {new}.",
    )
    return Generated(
        "env-set-value",
        prompt,
        {name: _env_text(values)},
        Check(files={name: re.escape(_env_text({**values, key: new}))}),
        [call("run_command", command=f"sed -i 's/^{key}=.*/{key}={new}/' {name}")],
        f"Done: {key} is now {new} in {name}.",
    )


def env_add_var(rng: random.Random) -> Generated:
    """A new variable added at the end of a .env file."""
    name = rng.choice([".env", ".env", ".env.local"])
    keys, values = _env(rng)
    key, value = keys[-1], values.pop(keys[-1])
    line = f"{key}={value}"
    prompt = pick(
        rng,
        f"Add the variable {line} to {name}",
        f"add {key} with the value {value} to {name}",
        f"Please add a line {line} at the end of {name}.",
        f"Append {key}={value} to the {name} file.",
    )
    return Generated(
        "env-add-var",
        prompt,
        {name: _env_text(values)},
        Check(files={name: re.escape(_env_text(values) + line) + r"\n?"}),
        [call("append_line", path=name, line=line)],
        f"Done: added {key} to {name}.",
    )


def ini_set_value(rng: random.Random) -> Generated:
    """A setting of an INI file given a new value."""
    name = rng.choice(["app", "server", "setup", "service", "tool"]) + ".ini"
    sections = rng.sample(SECTIONS, 2)
    keys = rng.sample(NUMBER_KEYS + WORD_KEYS, rng.randint(3, 5))
    values = _settings(rng, keys)
    half = len(keys) // 2

    def text(vals: dict[str, int | str]) -> str:
        first = "".join(f"{k} = {vals[k]}\n" for k in keys[:half])
        second = "".join(f"{k} = {vals[k]}\n" for k in keys[half:])
        return f"[{sections[0]}]\n{first}\n[{sections[1]}]\n{second}"

    key = rng.choice(keys)
    new = _other_value(rng, values[key])
    prompt = pick(
        rng,
        f"Set {key} to {new} in {name}.",
        f"Change the {key} setting in {name} to {new}",
        f"in {name}, make {key} {new}",
        f"Please update {name} so that {key} is {new}.",
    )
    return Generated(
        "ini-set-value",
        prompt,
        {name: text(values)},
        Check(files={name: re.escape(text({**values, key: new}))}),
        [call("run_command", command=f"sed -i 's/^{key} = .*/{key} = {new}/' {name}")],
        f"Done: {key} is now {new} in {name}.",
    )


def csv_filter_rows(rng: random.Random) -> Generated:
    """The rows of a CSV file with one value, header first, written to a new file."""
    name = rng.choice(["people", "staff", "team", "members", "guests"]) + ".csv"
    city, *others = rng.sample(CITIES, 4)
    rows = _people(rng, rng.randint(5, 8))
    picked = rng.sample(range(len(rows)), rng.randint(2, 3))
    rows = [(n, a, city if i in picked else rng.choice(others)) for i, (n, a, _) in enumerate(rows)]
    out = rng.choice([city, f"{city}_rows", "filtered", "result"]) + ".csv"
    prompt = pick(
        rng,
        f"Put the rows of {name} whose city is {city} into {out}, keeping the header.",
        f"Write the {city} rows of {name} to {out}, with the header line first.",
        f"copy every row of {name} with city {city} into a new file {out} (header included)",
        f"Filter {name} to the rows for {city} and save them, header and all, as {out}.",
    )
    want = _csv("name,age,city", [r for r in rows if r[2] == city])
    return Generated(
        "csv-filter-rows",
        prompt,
        {name: _csv("name,age,city", rows)},
        Check(files={out: re.escape(want)}),
        [call("run_command", command=f"awk 'NR==1 || /{city}/' {name} > {out}")],
        f"Wrote the {city} rows of {name} to {out}.",
    )


def csv_sort_column(rng: random.Random) -> Generated:
    """A CSV file's rows sorted by a numeric column, smallest first, into a new file."""
    name = rng.choice(["scores", "prices", "results", "stock"]) + ".csv"
    first, second = rng.sample(["score", "price", "age", "points", "stock", "weight"], 2)
    n = rng.randint(4, 7)
    rows = list(
        zip(
            rng.sample(NAMES, n),
            rng.sample(range(1, 500), n),
            rng.sample(range(1, 500), n),
            strict=True,
        )
    )
    index = rng.choice([1, 2])
    column = (first, second)[index - 1]
    out = rng.choice(["sorted", f"by_{column}", "ordered", "ranked"]) + ".csv"
    prompt = pick(
        rng,
        f"Sort the rows of {name} by {column}, smallest first, into {out} (header on top).",
        f"Write {name} sorted by the {column} column, lowest first, to {out}; header first.",
        f"sort {name} by {column} in ascending order and save it as {out}, header line first",
        f"Please put the rows of {name} in order of {column} (low to high) in a new file {out}, "
        "with the header at the top.",
    )
    header = f"name,{first},{second}"
    ordered = sorted(rows, key=lambda r: r[index])
    want = _csv(header, ordered)
    return Generated(
        "csv-sort-column",
        prompt,
        {name: _csv(header, rows)},
        Check(files={out: re.escape(want)}),
        [call("run_command", command=f"sort -t, -k{index + 1} -n {name} > {out}")],
        f"Wrote {name} sorted by {column} to {out}.",
    )


def csv_extract_column(rng: random.Random) -> Generated:
    """One column of a CSV file written to a new file."""
    name = rng.choice(["people", "staff", "team", "members", "guests"]) + ".csv"
    rows = _people(rng, rng.randint(3, 6))
    index, column = rng.choice([(1, "name"), (2, "age"), (3, "city")])
    out = rng.choice([f"{column}s", column, "column", "out"]) + ".txt"
    prompt = pick(
        rng,
        f"Save the {column} column of {name} to {out}.",
        f"Write just the {column} column from {name} into {out}",
        f"extract the {column} column of {name} into a file {out}",
        f"Please put column {index} ({column}) of {name} in {out}.",
    )
    values = "".join(f"{r[index - 1]}\n" for r in rows)
    return Generated(
        "csv-extract-column",
        prompt,
        {name: _csv("name,age,city", rows)},
        Check(files={out: f"(?:{column}\\n)?" + re.escape(values)}),
        [call("run_command", command=f"cut -d, -f{index} {name} > {out}")],
        f"Wrote the {column} column of {name} to {out}.",
    )


def yaml_list_items(rng: random.Random) -> Generated:
    """The items of the one list in a YAML file."""
    name = rng.choice(["deploy", "config", "pipeline", "project", "site"]) + ".yaml"
    key = rng.choice(["packages", "hosts", "steps", "tags", "members", "plugins"])
    items = rng.sample(NAMES if key in ("hosts", "members") else WORDS, rng.randint(2, 5))
    scalars = _settings(rng, rng.sample(NUMBER_KEYS + WORD_KEYS, 2))
    before, after = list(scalars.items())[:1], list(scalars.items())[1:]
    text = (
        "".join(f"{k}: {v}\n" for k, v in before)
        + f"{key}:\n"
        + "".join(f"  - {item}\n" for item in items)
        + "".join(f"{k}: {v}\n" for k, v in after)
    )
    prompt = pick(
        rng,
        f"What are the {key} in {name}?",
        f"List the {key} in {name}.",
        f"which {key} does {name} have?",
        f"Show me the {key} listed in {name}",
        f"Please read the {key} list from {name}.",
    )
    return Generated(
        "yaml-list-items",
        prompt,
        {name: text},
        _all_of(*items),
        [call("read_file", path=name)],
        f"The {key} in {name} are: {', '.join(items)}.",
    )


STRUCTURED_FAMILIES: dict[str, Generator] = {
    "json-nested-value": json_nested_value,
    "json-list-length": json_list_length,
    "json-keys": json_keys,
    "toml-value": toml_value,
    "csv-lookup": csv_lookup,
    "json-set-value": json_set_value,
    "env-set-value": env_set_value,
    "ini-set-value": ini_set_value,
    "csv-filter-rows": csv_filter_rows,
    "csv-sort-column": csv_sort_column,
    "csv-extract-column": csv_extract_column,
    "yaml-list-items": yaml_list_items,
    "json-add-key": json_add_key,
    "env-add-var": env_add_var,
}
