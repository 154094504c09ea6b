"""Gold by search: with recipes offered in place of run_command, a run_command family's task
is solved by trying the offered tools with values from the request, through the real loop,
skills and sandbox, and graded by the task's own check."""

from __future__ import annotations

import json
from pathlib import Path

from agent.messages import ChatRequest, FunctionSpec, ToolSpec, UserMessage
from backends.fake import FakeBackend
from cli.config import Settings, load_settings
from cli.evals.generators.curriculum import generate
from cli.evals.generators.gold import run_gold
from cli.evals.generators.search import _Pick, candidate_calls, search_gold
from cli.evals.runner import Variant, run_task
from cli.evals.suite import Check, Suite, Task


def _tool(name: str, description: str, props: dict[str, dict[str, object]]) -> ToolSpec:
    params = {"type": "object", "properties": props, "required": list(props)}
    return ToolSpec(function=FunctionSpec(name=name, description=description, parameters=params))


def test_candidates_copy_the_request_named_file_first_and_verbs_last() -> None:
    lines_with = _tool(
        "lines_with",
        "Find the lines of a file that contain or mention a word.",
        {
            "path": {"type": "string", "enum": ["a.txt", "plan.log", "z.md"]},
            "word": {"type": "string"},
        },
    )
    first = _tool(
        "first_lines",
        "Show the first lines.",
        {"path": {"type": "string"}, "n": {"type": "integer"}},
    )
    request = ChatRequest(
        messages=[UserMessage(content="Which lines in plan.log mention candle?")],
        tools=[first, lines_with],  # the selection shows its best match last
        allowed_tools=["lines_with", "first_lines", "answer"],
    )
    calls = candidate_calls(request)
    # The one file the request names; "candle" before "mention", a word the tool itself uses.
    assert calls[0] == ("lines_with", {"path": "plan.log", "word": "candle"})
    assert ("lines_with", {"path": "plan.log", "word": "mention"}) in calls
    assert all(c[1].get("path") != "a.txt" for c in calls)
    # No number written means one ("the first line"); a path not in a list is a named file.
    assert ("first_lines", {"path": "plan.log", "n": 1}) in calls
    # A tool the step may not call is not tried.
    request.allowed_tools = ["first_lines", "answer"]
    assert {c[0] for c in candidate_calls(request)} == {"first_lines"}


def _settings(tmp_path: Path, recipes: bool = True) -> Settings:
    return load_settings(
        {"data_dir": tmp_path, "small.recipes": recipes, "small.command_tool": False}
    ).model_copy(update={"profile": "small"})


def test_a_run_command_family_is_solved_by_a_recipe_answered_in_its_own_words(
    tmp_path: Path,
) -> None:
    made = generate(1, seed=91, families=["sum-numbers"])
    [(task, gold)] = made.items
    assert gold.calls[0].name == "run_command"
    found = search_gold(task, made.suite(), _settings(tmp_path))
    assert found is not None
    result, backend, turns = found
    assert result.passed
    call, answer = (t.tool_calls[0].function for t in turns if t.tool_calls)
    assert call.name == "sum_numbers"
    # The answer is the tool's own sentence, as the loop showed it to the model.
    last_result = backend.requests[-1].messages[-1]
    assert json.loads(answer.arguments)["text"] == last_result.content
    assert gold.answer.split()[-1].rstrip(".") in str(last_result.content)


def test_a_wrong_value_is_not_rescued_by_the_right_answer(tmp_path: Path) -> None:
    # The offered tools are tried, and none gives the number the check wants, so no run
    # passes: the search answers only with what a tool's result said.
    task = Task(
        id="plus",
        prompt="How many lines does notes.txt have, plus 57?",
        files={"notes.txt": "one\ntwo\n"},
        check=Check(answer_regex=r"\b59\b"),
    )
    suite = Suite(name="t", tasks=[task])
    pick = _Pick(0)
    run_task(
        Variant("probe", _settings(tmp_path), FakeBackend([pick.call, pick.answer])), suite, task, 0
    )
    assert pick.count >= 1 and pick.turns[0].tool_calls
    assert search_gold(task, suite, _settings(tmp_path)) is None


def test_gold_runs_search_only_where_run_command_is_not_offered(tmp_path: Path) -> None:
    made = generate(2, seed=91, families=["sum-numbers", "count"])
    runs = {r.result.task.rsplit("-", 1)[0]: r for r in run_gold(made, _settings(tmp_path))}
    searched, gold = runs["gen-sum-numbers"], runs["gen-count"]
    assert searched.searched and searched.result.passed and searched.examples
    assert not gold.searched and gold.result.passed
    [example] = searched.examples
    tools = [t["function"]["name"] for t in example["tools"]]
    assert "sum_numbers" in tools and "run_command" not in tools
    # Without recipes a run_command family's gold is not searched for (it is not drawn at all).
    plain = next(
        iter(run_gold(generate(1, seed=91, families=["count"]), _settings(tmp_path, False)))
    )
    assert not plain.searched
