"""Command recipes: every bundled recipe run for real in the OS sandbox on a real workspace,
values that cannot become shell text, and the catalog's own checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.errors import ToolError
from agent.tools import Toolbox
from cli.approvals import AutoApprover
from sandbox.settings import ResourceLimits, SandboxSettings
from skills.context import Places, SkillContext
from skills.recipes.catalog import BUNDLED, RecipeFileError, load_recipes
from skills.toolbox import build_toolbox


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    files = {
        "notes.txt": "harbor at dawn\nferry at noon\nthe Harbor again\n\nlast line here\n",
        "nums.txt": "12\n7\n30\n5\n",
        "more.txt": "total 3 and 4.5\n",
        "dups.txt": "pear\napple\npear\nfig\npear\napple\n",
        "people.csv": "name,age\nada,36\nbob,41\ncy,20\n",
        "service.json": '{"name": "api", "port": 8080, "debug": false}\n',
        ".env": "USER=ada\nLEVEL='low'\n",
        "app.ini": "[main]\ncolor = red\n",
        "app.py": "import os\n\ndef a():\n    pass\n\nasync def b():\n    pass\n"
        "class C:\n    def m(self):\n        pass\n",
        "calc.py": "print(6 * 7)\n",
        "hi.sh": "echo hi from sh\n",
        "a.jpg": "jpg1",
        "b.jpg": "jpg2",
        "old.tmp": "x",
        "docs/one.md": "# one\n",
        "docs/deep/two.md": "# two\nmore\n",
        "big.log": "x" * 500 + "\n",
    }
    for name, text in files.items():
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text(text)
    return ws


def toolbox(ws: Path, extra: Path | None = None) -> Toolbox:
    context = SkillContext.create(
        ws,
        SandboxSettings(limits=ResourceLimits(timeout_s=10, output_bytes=8000)),
        places=Places(audit_path=ws.parent / "audit.jsonl"),
        options={"recipe_file": str(extra) if extra else None},
    )
    return build_toolbox(context, AutoApprover(), ["recipes"])


def call(tb: Toolbox, name: str, **arguments: object) -> str:
    tool = tb.get(name)
    assert tool is not None, name
    result = tool.call(dict(arguments))
    assert not result.is_error, result.render()
    return result.render()


READS = [
    (
        "first_lines",
        {"path": "notes.txt", "n": 2},
        "The first 2 lines of notes.txt: harbor at dawn | ferry at noon",
    ),
    ("last_lines", {"path": "nums.txt", "n": 1}, "The last 1 lines of nums.txt: 5"),
    ("show_line", {"path": "notes.txt", "n": 3}, "Line 3 of notes.txt: the Harbor again"),
    (
        "lines_with",
        {"path": "notes.txt", "word": "harbor"},
        "Lines of notes.txt with harbor (line number: text): 1:harbor at dawn | 3:the Harbor again",
    ),
    (
        "count_lines_with",
        {"path": "notes.txt", "word": "harbor"},
        "2 lines of notes.txt contain harbor.",
    ),
    (  # a word copied with the space before it is the word
        "count_lines_with",
        {"path": "notes.txt", "word": " harbor "},
        "2 lines of notes.txt contain harbor.",
    ),
    (
        "count_lines_with",
        {"path": "notes.txt", "word": "zebra"},
        "0 lines of notes.txt contain zebra.",
    ),
    (
        "count_occurrences",
        {"path": "dups.txt", "word": "pear"},
        "pear appears 3 times in dups.txt.",
    ),
    (
        "most_common",
        {"path": "dups.txt"},
        "The most common lines of dups.txt, with how many times each appears: "
        "pear: 3 | apple: 2 | fig: 1",
    ),
    ("count_characters", {"path": "nums.txt"}, "nums.txt has 10 characters."),
    ("longest_line", {"path": "notes.txt"}, "The longest line of notes.txt: the Harbor again"),
    ("count_files", {"ext": ".md"}, "There are 2 .md files."),
    ("count_files", {"ext": "md"}, "There are 2 .md files."),
    ("find_files", {"ext": "*.md"}, "The .md files: docs/deep/two.md | docs/one.md"),
    ("count_files_in", {"folder": "docs"}, "docs holds 2 files."),
    ("largest_file", {}, "The largest file is big.log."),
    ("unique_lines", {"path": "dups.txt"}, "The distinct lines of dups.txt: apple | fig | pear"),
    ("count_unique", {"path": "dups.txt"}, "dups.txt has 3 distinct lines."),
    (
        "duplicate_lines",
        {"path": "dups.txt"},
        "Lines that appear more than once in dups.txt: apple | pear",
    ),
    ("sum_numbers", {"path": "nums.txt"}, "The numbers in nums.txt add up to 54."),
    (
        "sum_numbers_in_both",
        {"path": "nums.txt", "other": "more.txt"},
        "The numbers in nums.txt and more.txt add up to 61.5.",
    ),
    ("average_numbers", {"path": "nums.txt"}, "The average of the numbers in nums.txt is 13.5."),
    ("largest_number", {"path": "nums.txt"}, "The largest number in nums.txt is 30."),
    ("smallest_number", {"path": "nums.txt"}, "The smallest number in nums.txt is 5."),
    ("count_rows", {"path": "people.csv"}, "people.csv has 3 rows besides the header."),
    (
        "csv_column",
        {"path": "people.csv", "column": "name"},
        "The name column of people.csv: ada | bob | cy",
    ),
    (
        "csv_column_sum",
        {"path": "people.csv", "column": "age"},
        "The age column of people.csv adds up to 97.",
    ),
    (
        "csv_column_average",
        {"path": "people.csv", "column": "age"},
        "The average of the age column of people.csv is 32.33.",
    ),
    ("json_keys", {"path": "service.json"}, "The keys of service.json: name, port, debug"),
    ("config_value", {"path": "service.json", "key": "port"}, "port in service.json is 8080"),
    ("config_value", {"path": "app.ini", "key": "color"}, "color in app.ini is red"),
    ("count_functions", {"path": "app.py"}, "app.py defines 3 functions."),
    ("list_functions", {"path": "app.py"}, "The functions in app.py: a | b | m"),
    (
        "sort_numerically",
        {"path": "nums.txt"},
        "The lines of nums.txt, smallest first: 5 | 7 | 12 | 30",
    ),
    ("reverse_lines", {"path": "nums.txt"}, "The lines of nums.txt, last first: 5 | 30 | 7 | 12"),
    ("empty_lines", {"path": "notes.txt"}, "notes.txt has 1 empty lines."),
    ("total_lines", {"ext": ".md"}, "The .md files have 3 lines in all."),
    ("compare_files", {"path": "nums.txt", "other": "nums.txt"}, "The files are the same."),
]


@pytest.mark.parametrize(("name", "arguments", "expected"), READS, ids=[r[0] for r in READS])
def test_each_reading_recipe_answers_in_a_sentence(
    ws: Path, name: str, arguments: dict[str, object], expected: str
) -> None:
    assert call(toolbox(ws), name, **arguments) == expected


def test_the_newest_file_is_the_one_changed_last(ws: Path) -> None:
    tb = toolbox(ws)
    (ws / "fresh.txt").write_text("new\n")
    assert call(tb, "newest_file") == "The most recently changed file is fresh.txt."


def test_writing_recipes_change_the_workspace(ws: Path) -> None:
    tb = toolbox(ws)
    assert call(tb, "set_config_value", path=".env", key="LEVEL", value="high") == (
        "Set LEVEL to high in .env."
    )
    assert (ws / ".env").read_text() == "USER=ada\nLEVEL='high'\n"
    call(tb, "set_config_value", path=".env", key="LIMIT", value="2722")
    assert (ws / ".env").read_text().endswith("LIMIT=2722\n")
    call(tb, "set_config_value", path="service.json", key="port", value="9090")
    assert json.loads((ws / "service.json").read_text())["port"] == 9090
    call(tb, "set_config_value", path="app.ini", key="color", value="blue")
    assert (ws / "app.ini").read_text() == "[main]\ncolor = blue\n"

    assert call(tb, "delete_lines_with", path="notes.txt", word="harbor") == (
        "Removed the lines with harbor from notes.txt."
    )
    assert (ws / "notes.txt").read_text() == "ferry at noon\n\nlast line here\n"
    call(tb, "remove_empty_lines", path="notes.txt")
    assert (ws / "notes.txt").read_text() == "ferry at noon\nlast line here\n"
    call(tb, "uppercase_file", path="notes.txt")
    assert (ws / "notes.txt").read_text() == "FERRY AT NOON\nLAST LINE HERE\n"
    call(tb, "lowercase_file", path="notes.txt")
    assert (ws / "notes.txt").read_text() == "ferry at noon\nlast line here\n"

    call(tb, "save_output", script="calc.py", to="out.txt")
    assert (ws / "out.txt").read_text() == "42\n"
    call(tb, "save_output", script="hi.sh", to="hi.txt")
    assert (ws / "hi.txt").read_text() == "hi from sh\n"
    call(tb, "merge_files", path="nums.txt", other="more.txt", to="both.txt")
    assert (ws / "both.txt").read_text() == "12\n7\n30\n5\ntotal 3 and 4.5\n"
    # Made by a sandboxed command, so it belongs to whoever the sandbox runs commands as.
    call(tb, "save_output", script="calc.py", to="run.sh")
    call(tb, "make_executable", path="run.sh")
    assert (ws / "run.sh").stat().st_mode & 0o100

    call(tb, "copy_files", ext=".jpg", folder="backup")
    assert sorted(p.name for p in (ws / "backup").iterdir()) == ["a.jpg", "b.jpg"]
    assert call(tb, "move_files", ext="jpg", folder="photos/2026") == (
        "Moved the .jpg files into photos/2026."
    )
    assert sorted(p.name for p in (ws / "photos" / "2026").iterdir()) == ["a.jpg", "b.jpg"]
    assert not (ws / "a.jpg").exists()
    call(tb, "delete_files", ext=".tmp")
    assert not (ws / "old.tmp").exists() and (ws / "nums.txt").exists()


def test_a_value_is_an_argument_never_shell_text(ws: Path) -> None:
    tb = toolbox(ws)
    assert call(tb, "count_lines_with", path="notes.txt", word="$(touch pwned); `touch p2`") == (
        "0 lines of notes.txt contain $(touch pwned); `touch p2`."
    )
    assert call(tb, "count_lines_with", path="notes.txt", word="-v") == (
        "0 lines of notes.txt contain -v."
    )
    (ws / "-x.txt").write_text("a\n")
    assert call(tb, "first_lines", path="-x.txt", n=1) == "The first 1 lines of -x.txt: a"
    assert not (ws / "pwned").exists() and not (ws / "p2").exists()


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("first_lines", {"path": "notes.txt", "n": "two"}, "must be a whole number"),
        ("first_lines", {"path": "notes.txt"}, "needs n"),
        ("count_files", {"ext": "m d;rm"}, "must be a file extension"),
        ("first_lines", {"path": "../outside.txt", "n": 1}, "outside"),
        ("first_lines", {"path": "missing.txt", "n": 1}, "No such file"),
        ("json_keys", {"path": "notes.txt"}, "failed"),
        ("first_lines", {"path": "notes.txt", "n": 1, "extra": 1}, "no argument 'extra'"),
    ],
)
def test_bad_arguments_are_errors_the_model_can_read(
    ws: Path, name: str, arguments: dict[str, object], error: str
) -> None:
    tool = toolbox(ws).get(name)
    assert tool is not None
    with pytest.raises(ToolError, match=error):
        tool.call(arguments)


def test_path_arguments_are_offered_as_the_workspace_files(ws: Path) -> None:
    spec = next(s for s in toolbox(ws).specs() if s.function.name == "first_lines")
    properties = spec.function.parameters["properties"]
    assert "notes.txt" in properties["path"]["enum"]
    assert properties["n"]["type"] == "integer"


def test_a_users_recipe_file_adds_tools_and_replaces_a_bundled_one(ws: Path) -> None:
    own = ws.parent / "recipes.toml"
    own.write_text(
        '[[recipe]]\nname = "word_lengths"\ndescription = "Show each word with its length."\n'
        "command = \"tr -s ' ' '\\\\n' < {path} | awk '{ print $0, length($0) }'\"\n"
        '[recipe.args]\npath = "file"\n\n'
        '[[recipe]]\nname = "count_characters"\ndescription = "Count characters."\n'
        'command = "wc -c < {path}"\nsays = "{output} bytes"\n[recipe.args]\npath = "file"\n'
    )
    tb = toolbox(ws, own)
    assert call(tb, "word_lengths", path="more.txt").splitlines()[:2] == ["total 5", "3 1"]
    assert call(tb, "count_characters", path="nums.txt") == "10 bytes"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[[recipe]]\nname = "x y"\ndescription = "d"\ncommand = "c"\n', "name must be"),
        ('[[recipe]]\nname = "ab"\ncommand = "c"\n', "needs a description"),
        ('[[recipe]]\nname = "ab"\ndescription = "d"\ncommand = "cat {p}"\n', "not in args"),
        (
            '[[recipe]]\nname = "ab"\ndescription = "d"\ncommand = "ls"\n'
            '[recipe.args]\np = "file"\n',
            "not in the command",
        ),
        (
            '[[recipe]]\nname = "ab"\ndescription = "d"\ncommand = "cat {p}"\n'
            '[recipe.args]\np = "blob"\n',
            "has kind 'blob'",
        ),
        ('[[recipe]]\nname = "ab"\ndescription = "d"\ncommand = "ls"\neffect = "exec"\n', "effect"),
        ("[[recipe]\n", "cannot be read"),
    ],
)
def test_a_broken_recipe_file_names_its_mistake(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "r.toml"
    path.write_text(text)
    with pytest.raises(RecipeFileError, match=error):
        load_recipes(path)


def test_the_bundled_catalog_loads_and_every_recipe_is_tested() -> None:
    names = {r.name for r in load_recipes(BUNDLED)}
    tested = {r[0] for r in READS} | {
        "newest_file", "set_config_value", "delete_lines_with", "remove_empty_lines",
        "uppercase_file", "lowercase_file", "save_output", "merge_files", "make_executable",
        "copy_files", "move_files", "delete_files",
    }  # fmt: skip
    assert names == tested


def test_a_recipe_file_inside_the_workspace_is_refused(ws: Path) -> None:
    # A sandboxed command could rewrite it, and recipes run without the shell's rules.
    from agent.errors import UserError
    from cli.config import Settings

    settings = Settings.model_validate(
        {
            "workspace": ws,
            "data_dir": ws.parent / "d",
            "small": {"recipes": True, "recipe_file": str(ws / "recipes.toml")},
        }
    )
    with pytest.raises(UserError, match=r"recipe file .* \[small\] recipe_file"):
        SkillContext.from_settings(settings)
    outside = settings.model_copy(
        update={
            "small": settings.small.model_copy(update={"recipe_file": str(ws.parent / "r.toml")})
        }
    )
    assert SkillContext.from_settings(outside).options["recipe_file"] == str(ws.parent / "r.toml")


@pytest.mark.parametrize(
    ("request_text", "offered"),
    [
        ("count the lines in server.log", ["count_lines", "count_words", "count_bytes"]),
        ("how many characters are in memo.md", ["count_lines", "count_words", "count_characters"]),
        ("what is the character count of memo.md", ["count_characters"]),
        ("Show the first 3 lines of notes.txt", ["first_lines"]),
        ("Thanks, that is all for today!", []),
        ("What is the capital of France?", []),
    ],
)
def test_the_small_profile_offers_a_recipe_only_where_it_matches_better(
    ws: Path, request_text: str, offered: list[str]
) -> None:
    # The selection as cli/wiring.py builds it for the small profile with recipes on.
    from agent.messages import UserMessage
    from agent.tool_selection import LexicalToolSelector
    from skills.recipes.tools import recipe_names

    context = SkillContext.create(ws, places=Places(audit_path=ws.parent / "audit.jsonl"))
    specs = build_toolbox(context, AutoApprover(), ["simple", "recipes"]).specs()
    select = LexicalToolSelector(
        3, always=["answer"], never=["run_command"], secondary=recipe_names(None)
    )
    shown, _ = select.choose([UserMessage(content=request_text)], specs)
    assert sorted(s.function.name for s in shown) == sorted([*offered, "answer"])
