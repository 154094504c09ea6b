"""evals/unseen.yaml: every task passes on a reference solution, graded by the real check code,
fails on its untouched workspace and on the wrong answers a careless run would give, and
measures exactly the catalogue's held-out families."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli.evals.checks import failures
from cli.evals.generators.catalogue import held_out_families
from cli.evals.suite import Task, load_suite

ROOT = Path(__file__).resolve().parents[2]
SUITE = load_suite(ROOT / "evals" / "unseen.yaml")
TASKS = {task.id: task for task in SUITE.tasks}


@dataclass(frozen=True)
class Ref:
    """A reference solution: a bash command run in the workspace, then the final answer.

    ``{out}`` in the answer is replaced by the command's output, so a question's expected
    value is computed from the workspace rather than copied from the suite. ``wrong`` holds
    answers, and ``wrong_command`` a change, that a careless run might give: each must fail.
    """

    command: str
    answer: str = "Done."
    wrong: tuple[str, ...] = ()
    wrong_command: str | None = None


REFS: dict[str, Ref] = {
    "last-line.server-log": Ref(
        "tail -n 1 server.log",
        "The last line of server.log is:\n{out}",
        ("2026-03-02 09:14:01 INFO server starting on port 8080", "INFO worker 3 restarted"),
    ),
    "last-line.journal": Ref(
        "tail -n 1 journal.txt",
        'The last line says "{out}".',
        ("Mon: started the new running plan", "Thu: rain, skipped the run"),
    ),
    "tail-lines.access-log": Ref(
        "tail -n 3 access.log",
        "Here are the last 3 lines of access.log:\n{out}",
        (
            "12:00:01 GET /index.html 200\n12:00:04 GET /style.css 200\n12:00:09 POST /login 302",
            "12:00:09 POST /login 302\n12:01:15 GET /dashboard 200\n"
            "12:01:16 GET /api/stats 500\n12:01:20 GET /favicon.ico 404",
            "12:01:20 GET /favicon.ico 404",
        ),
    ),
    "tail-lines.meeting-notes": Ref(
        "tail -n 2 meeting-notes.md",
        "The last two lines are:\n{out}",
        (
            "- Action: Priya books the room",
            "- Decision: ship on Friday\n- Action: Tom emails the vendor\n"
            "- Action: Priya books the room",
        ),
    ),
    "count-matching-lines.errors": Ref(
        "grep -c ERROR app.log",
        "{out} lines of app.log contain ERROR.",
        ("ERROR appears 5 times.", "app.log has 10 lines."),
    ),
    "count-matching-lines.customers": Ref(
        "grep -c Berlin customers.csv",
        "{out} customers are from Berlin.",
        ("There are 10 customers.", "customers.csv has 11 lines."),
    ),
    "count-nonempty-lines.poem": Ref(
        "grep -c . poem.txt",
        "poem.txt has {out} lines with text on them.",
        ("poem.txt has 13 lines.", "There are 3 verses."),
    ),
    "count-nonempty-lines.settings": Ref(
        "grep -c . settings.ini",
        "{out} non-empty lines.",
        ("settings.ini has 12 lines.", "There are 3 sections."),
    ),
    "count-folders.project": Ref(
        "find . -mindepth 1 -type d | wc -l",
        "There are {out} folders.",
        ("There are 3 folders: src, tests and docs.", "There are 7 files."),
    ),
    "count-folders.paperwork": Ref(
        "find . -mindepth 1 -type d | wc -l",
        "You have {out} directories.",
        ("You have 7 files.", "There are 8 entries."),
    ),
    "count-lines-all.chapters": Ref(
        "cat *.txt | wc -l",
        "The .txt files have {out} lines in total.",
        ("19 lines in all files.", "ch1.txt has 5 lines."),
    ),
    "count-lines-all.logs": Ref(
        "cat monday.log tuesday.log wednesday.log | wc -l",
        "4 + 6 + 3 = {out} lines.",
        ("18 lines across all four logs.", "tuesday.log has 6 lines."),
    ),
    "average-numbers.temps": Ref(
        "awk '{s+=$1} END {print s/NR}' temps.txt",
        "The average was {out} degrees.",
        ("The total is 75.", "About 12 degrees.", "12.55", "The first day was 14."),
    ),
    "average-numbers.commute": Ref(
        "awk '{s+=$1} END {print s/NR}' commute.txt",
        "On average {out} minutes.",
        ("260 minutes in total.", "About 32 minutes.", "132.5"),
    ),
    "min-number.prices": Ref(
        "sort -n prices.txt | head -n 1",
        "The cheapest price is ${out}.",
        ("12.00", "The cheapest is 19.99", "4.50", "13.75"),
    ),
    "min-number.reaction": Ref(
        "sort -n reaction_ms.txt | head -n 1",
        "Your fastest was {out} ms.",
        ("1020 ms", "312 ms", "1197"),
    ),
    "json-list-sum.orders": Ref(
        'python3 -c "import json; '
        "print(sum(o['amount'] for o in json.load(open('orders.json'))))\"",
        "The amounts add up to {out}.",
        ("The ids add up to 10.", "There are 4 orders.", "84.7"),
    ),
    "json-list-sum.inventory": Ref(
        'python3 -c "import json; '
        "print(sum(i['qty'] for i in json.load(open('inventory.json'))['items']))\"",
        "{out} units in stock.",
        ("There are 4 items.", "300 washers."),
    ),
    "largest-file.home": Ref(
        "ls -S | head -n 1",
        "{out} is the biggest file.",
        ("recipes.md", "budget.csv, letter.txt, readme.txt, recipes.md, todo.txt"),
    ),
    "largest-file.monthly-csv": Ref(
        "ls -S *.csv | head -n 1",
        "{out} is the largest of the exports.",
        ("summary.txt", "jan.csv", "jan.csv feb.csv mar.csv"),
    ),
    "find-definition.slugify": Ref(
        "grep -rl 'def slugify' .",
        "slugify is defined in {out}.",
        ("app/views.py", "./app/text_utils.py\n./app/views.py\n./tests/test_text.py"),
    ),
    "find-definition.load-config": Ref(
        "grep -rl 'def load_config' .",
        "It is defined in {out}.",
        ("config.py", "loader.py and main.py"),
    ),
    "strip-trailing-space.notes": Ref(
        "sed -i 's/[ ]*$//' notes.md",
        wrong_command="sed -i 's/^[ ]*//; s/[ ]*$//' notes.md",
    ),
    "strip-trailing-space.backup-script": Ref(
        "sed -i 's/[ ]*$//' backup.sh",
        wrong_command="sed -i '1s/[ ]*$//' backup.sh",
    ),
    "number-lines.todo": Ref(
        "nl todo.txt > todo_numbered.txt", wrong_command="cp todo.txt todo_numbered.txt"
    ),
    "number-lines.recipe": Ref(
        "awk '{print NR \". \" $0}' recipe.txt > recipe_numbered.txt",
        wrong_command="awk '{print NR-1 \". \" $0}' recipe.txt > recipe_numbered.txt",
    ),
    "merge-files.story": Ref(
        "cat part1.txt part2.txt > story.txt",
        wrong_command="cat part2.txt part1.txt > story.txt",
    ),
    "merge-files.contacts": Ref(
        "cat friends.txt work.txt > contacts.txt",
        wrong_command="cat work.txt friends.txt > contacts.txt",
    ),
    "reverse-sort.team": Ref(
        "sort -r team.txt -o team_desc.txt", wrong_command="tac team.txt > team_desc.txt"
    ),
    "reverse-sort.tags": Ref(
        "sort -r tags.txt -o tags.txt", wrong_command="sort tags.txt -o tags.txt"
    ),
    "numeric-sort.sizes": Ref(
        "sort -n sizes.txt -o sizes_sorted.txt", wrong_command="sort sizes.txt -o sizes_sorted.txt"
    ),
    "numeric-sort.scores": Ref(
        "sort -rn scores.txt -o scores.txt", wrong_command="sort -r scores.txt -o scores.txt"
    ),
    "delete-line-n.shopping": Ref(
        "sed -i '3d' shopping.txt", wrong_command="sed -i '2d' shopping.txt"
    ),
    "delete-line-n.servers": Ref(
        "sed -i '2d' servers.txt", wrong_command="sed -i '3d' servers.txt"
    ),
    "backup-file.nginx": Ref(
        "cp nginx.conf nginx.conf.bak", wrong_command="mv nginx.conf nginx.conf.bak"
    ),
    "backup-file.thesis": Ref(
        "cp thesis.md thesis.md.bak", wrong_command="mv thesis.md thesis.md.bak"
    ),
    "delete-by-pattern.tmp": Ref("rm -- *.tmp", wrong_command="rm -- *tmp*"),
    "delete-by-pattern.logs": Ref("rm -- logs/*.log", wrong_command="rm -r logs"),
    "make-executable.deploy": Ref("chmod +x deploy.sh", wrong_command="chmod +r deploy.sh"),
    "make-executable.report": Ref("chmod +x report.py", wrong_command="chmod +x sales.csv"),
    "rename-extension.notes": Ref(
        'for f in *.txt; do mv -- "$f" "${f%.txt}.md"; done',
        wrong_command='for f in *.txt; do mv -- "$f" "$f.md"; done',
    ),
    "rename-extension.photos": Ref(
        'for f in photos/*.jpeg; do mv -- "$f" "${f%.jpeg}.jpg"; done',
        wrong_command="mv photos/beach.jpeg photos/beach.jpg",
    ),
    "exit-code.validate": Ref(
        "python3 validate.py > /dev/null; echo $?",
        "No, it fails: validate.py exits with code {out}.",
        ("It passes with exit code 0.", "It exits with 1.", "It found 2 bad emails."),
    ),
    "exit-code.migrate": Ref(
        "python3 migrate.py 2> /dev/null; echo $?",
        "migrate.py ends with exit status {out} (DATABASE_URL is not set).",
        ("It exits with status 0.", "Exit status 1."),
    ),
    "count-to-file.guests": Ref(
        "wc -l < guests.txt > guest_count.txt", wrong_command="wc -l guests.txt > guest_count.txt"
    ),
    "count-to-file.essay": Ref(
        "wc -w < essay.txt > wordcount.txt", wrong_command="wc -l < essay.txt > wordcount.txt"
    ),
    "read-then-compute.rent": Ref(
        "python3 -c \"print(int(open('rent.txt').read()) / int(open('income.txt').read()) * 100)\"",
        "{out}% of your pay goes on rent.",
        ("0.35", "2080", "35.5%", "135%"),
    ),
    "read-then-compute.odometer": Ref(
        "echo $(( $(cat end.txt) - $(cat start.txt) ))",
        "You drove {out} km.",
        ("96890 km", "48677 km", "46 km"),
    ),
}


def _workspace(task: Task, root: Path) -> Path:
    """The task's starting files, laid out as the eval runner lays them out."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, content in task.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    root.chmod(0o755)
    return root


def _bash(command: str, workspace: Path) -> str:
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=workspace,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "LC_ALL": "C"},
    )
    return done.stdout.strip()


def test_suite_covers_exactly_the_held_out_families() -> None:
    held = held_out_families()
    families = {task_id.split(".", 1)[0] for task_id in TASKS}
    assert len(SUITE.tasks) >= 44
    assert all("." in task_id for task_id in TASKS)
    assert families <= held, f"not held-out families: {sorted(families - held)}"
    assert held <= families, f"held-out families with no task: {sorted(held - families)}"


def test_every_task_has_a_reference_solution() -> None:
    assert set(REFS) == set(TASKS)


@pytest.mark.parametrize("task_id", list(TASKS))
def test_reference_solution_passes(task_id: str, tmp_path: Path) -> None:
    task, ref = TASKS[task_id], REFS[task_id]
    workspace = _workspace(task, tmp_path)
    out = _bash(ref.command, workspace)
    answer = ref.answer.replace("{out}", out)
    assert failures(task.check, workspace, answer, tool_calls=1) == []


@pytest.mark.parametrize("task_id", list(TASKS))
def test_untouched_workspace_fails(task_id: str, tmp_path: Path) -> None:
    task = TASKS[task_id]
    assert failures(task.check, _workspace(task, tmp_path), "", tool_calls=0)


@pytest.mark.parametrize("task_id", [t for t, r in REFS.items() if r.wrong or r.wrong_command])
def test_careless_solutions_fail(task_id: str, tmp_path: Path) -> None:
    task, ref = TASKS[task_id], REFS[task_id]
    for index, wrong in enumerate(ref.wrong):
        workspace = _workspace(task, tmp_path / f"answer-{index}")
        assert failures(task.check, workspace, wrong, tool_calls=1), wrong
    if ref.wrong_command is not None:
        workspace = _workspace(task, tmp_path / "command")
        _bash(ref.wrong_command, workspace)
        assert failures(task.check, workspace, "Done.", tool_calls=1), ref.wrong_command


@pytest.mark.parametrize("task_id", list(TASKS))
def test_questions_have_wrong_answers_and_their_answer_is_not_in_the_prompt(task_id: str) -> None:
    task, ref = TASKS[task_id], REFS[task_id]
    if task.check.answer_regex is None:
        assert ref.wrong_command is not None, "a change task needs a careless change to reject"
        return
    assert ref.wrong, "a question needs wrong answers to reject"
    assert re.search(task.check.answer_regex, task.prompt) is None
