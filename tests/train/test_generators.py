"""The curriculum: every family's generated tasks pass on their scripted gold solution (run
through the real loop, skills and sandbox) and fail without it; none is a held-out task."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from agent.errors import UserError
from agent.messages import ToolSpec, parse_message
from backends.gguf.default_model import default_model_path
from backends.local.chat_template import ChatTemplate
from backends.training.examples import read_examples
from cli.config import load_settings
from cli.evals.checks import failures
from cli.evals.generators.curriculum import generate, needs_command, trainable
from cli.evals.generators.families import FAMILIES
from cli.evals.generators.gold import example_lines, run_gold
from cli.evals.suite import load_suite
from cli.train_sources import write_jsonl

ROOT = Path(__file__).resolve().parents[2]
BASIC = load_suite(ROOT / "evals" / "basic.yaml")


def test_gold_solutions_pass_and_become_examples(tmp_path: Path) -> None:
    curriculum = generate(2 * len(FAMILIES), seed=7, held_out=BASIC.tasks)
    runs = list(
        run_gold(curriculum, load_settings({"data_dir": tmp_path, "small.command_tool": True}))
    )
    assert {r.result.task: r.result.failures for r in runs} == {
        t.id: [] for t, _ in curriculum.items
    }
    for run, (_, gold) in zip(runs, curriculum.items, strict=True):
        # One example holds the whole run where each step's request is a prefix of the next
        # one's; a run that changes the workspace changes the file enums in the tools, so its
        # steps stay one example each.
        assert len(run.examples) in {1, len(gold.calls) + 1}
        last = run.examples[-1]["messages"]
        assert last[0]["role"] == "system" and last[-1]["role"] == "assistant"
        assert last[-1]["tool_calls"][0]["function"]["name"] == "answer"
        task = max(i for i, m in enumerate(last) if m["role"] == "user")
        trained = [m for m in last[task:] if m["role"] == "assistant" and "weight" not in m]
        assert len(trained) == (len(gold.calls) + 1 if len(run.examples) == 1 else 1)
        # The prompt's worked examples are shown, never trained.
        assert all(m.get("weight") == 0 for m in last[:task] if m["role"] == "assistant")


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "chat"])
def test_checks_fail_without_the_solution(family: str) -> None:
    for _, gold in generate(5, seed=3, families=[family]).items:
        with tempfile.TemporaryDirectory() as empty:
            assert failures(gold.check, Path(empty), "I do not know.", 0), gold.prompt
        with tempfile.TemporaryDirectory() as start:
            for rel, text in gold.files.items():
                (Path(start) / rel).parent.mkdir(parents=True, exist_ok=True)
                (Path(start) / rel).write_text(text, encoding="utf-8")
            assert failures(gold.check, Path(start), "I do not know.", 0), gold.prompt


def test_tasks_vary_and_never_repeat_held_out_prompts() -> None:
    made = generate(400, seed=11, held_out=BASIC.tasks)
    held = {t.prompt.strip().lower() for t in BASIC.tasks}
    assert not [t.prompt for t, _ in made.items if t.prompt.strip().lower() in held]
    prompts = {t.prompt for t, _ in made.items if not t.id.startswith("gen-chat")}
    assert len(prompts) > 300  # names, contents and phrasings are drawn at random
    again = generate(400, seed=11, held_out=BASIC.tasks)
    assert [t for t, _ in again.items] == [t for t, _ in made.items]  # reproducible by seed


def test_unknown_family_is_a_user_error() -> None:
    from agent.errors import UserError

    with pytest.raises(UserError, match="unknown task family"):
        generate(3, families=["juggling"])


def test_training_draws_only_families_the_configuration_can_do() -> None:
    # Without run_command offered, a family solved by a run_command line cannot be trained.
    without = trainable(None, command_tool=False)
    assert "count" in without and "find" in without
    assert "sum-numbers" not in without and "first-line" not in without
    assert all(not needs_command(f) for f in without)
    assert set(trainable(None, command_tool=True)) == set(FAMILIES)
    with pytest.raises(UserError, match="command_tool = true"):
        trainable(["count", "sum-numbers"], command_tool=False)


def test_gold_runs_are_made_in_the_configured_prompt(tmp_path: Path) -> None:
    # The examples show the system prompt the adapter will run with: small-shots by default,
    # small-command where run_command is offered.
    curriculum = generate(1, seed=3, families=["count"])
    for command_tool, marker in ((False, False), (True, True)):
        settings = load_settings({"data_dir": tmp_path, "small.command_tool": command_tool})
        [run] = run_gold(curriculum, settings)
        tools = [t["function"]["name"] for t in run.examples[0].get("tools", [])]
        assert ("run_command" in tools) is marker


def _rendered(template: ChatTemplate, example: dict[str, Any]) -> str:
    raw = [{k: v for k, v in m.items() if k != "weight"} for m in example["messages"]]
    tools = [ToolSpec.model_validate(t) for t in example["tools"]]
    return template.render([parse_message(m) for m in raw], tools, add_generation_prompt=False)


def test_examples_read_back_from_their_file_render_the_prompt_the_model_was_sent(
    tmp_path: Path,
) -> None:
    # Tool schemas are rendered into the prompt as written; a file that reordered their keys
    # ("type" and "enum" of a file argument) would train on a prompt no run ever shows.
    curriculum = generate(2, seed=5, families=["count"])
    runs = list(run_gold(curriculum, load_settings({"data_dir": tmp_path / "data"})))
    examples = [e for r in runs for e in r.examples]
    assert examples and any('"enum"' in json.dumps(e["tools"]) for e in examples)
    write_jsonl(tmp_path / "a.jsonl", examples)
    (tmp_path / "b.jsonl").write_text("".join(f"{x}\n" for x in example_lines(iter(runs))))
    template = ChatTemplate.from_gguf(default_model_path())
    sent = [_rendered(template, e) for e in examples]
    for name in ("a.jsonl", "b.jsonl"):
        assert [_rendered(template, e) for e in read_examples([tmp_path / name])] == sent


def test_the_default_held_out_suite_is_found_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cli.train_sources import held_out_suites

    monkeypatch.chdir(tmp_path)  # outside the checkout, the filter still holds
    assert held_out_suites(None) == [ROOT / "evals" / "basic.yaml"]


def test_gold_runs_with_chosen_examples_show_only_other_families(tmp_path: Path) -> None:
    # With [small] shots on, each training example shows the library's nearest solved tasks,
    # but never one of the task's own family: the adapter learns to adapt a neighbour's call.
    from agent.shots import load_library

    library = load_library()
    family_of = {s.prompt: s.family for s in library.shots}
    settings = load_settings({"data_dir": tmp_path, "small.command_tool": True, "small.shots": 3})
    families = ["count", "first-line", "sum-numbers", "grep-lines", "json-keys"]
    curriculum = generate(2 * len(families), seed=13, families=families, held_out=BASIC.tasks)
    own_nearby = 0
    for run, (task, gold) in zip(run_gold(curriculum, settings), curriculum.items, strict=True):
        assert run.result.passed and run.examples
        for example in run.examples:
            users = [m["content"] for m in example["messages"] if m["role"] == "user"]
            assert users[-1] == task.prompt
            shown = [family_of[u] for u in users[:-1]]
            assert len(shown) == len(set(shown)) == 3  # three examples, one per family
            assert gold.family not in shown, (task.id, shown)
        # Left to itself the library would show the task's own family: the exclusion matters.
        own_nearby += gold.family in {s.family for s in library.nearest(task.prompt, 3)}
    assert own_nearby == len(curriculum.items)


def test_gold_runs_keep_the_configured_left_out_families(tmp_path: Path) -> None:
    from cli.evals.generators.gold import without_own_family

    settings = load_settings(
        {"data_dir": tmp_path, "small.shots": 3, "small.shot_leave_out": ["nth-line"]}
    )
    assert without_own_family(settings, "count").small.shot_leave_out == ["nth-line", "count"]
    assert settings.small.shot_leave_out == ["nth-line"]  # the caller's settings are unchanged
    # Without chosen examples the prompt's fixed ones are shown, and nothing changes.
    plain = load_settings({"data_dir": tmp_path})
    assert without_own_family(plain, "count") is plain


def test_training_draws_every_family_where_recipes_are_offered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With recipes offered, a run_command family can be solved without run_command: by the
    # model's own attempt (self-play, a teacher), and for gold by search over the offered tools.
    from cli.train_cmd import _generated

    config = tmp_path / "config.toml"
    monkeypatch.setenv("CLAWLOOP_CONFIG", str(config))
    config.write_text("[small]\nrecipes = true\n")
    assert set(_generated(None)) == set(FAMILIES)
    assert "sum-numbers" in _generated(["count", "sum-numbers"])
    config.write_text("[small]\nrecipes = false\n")
    assert "sum-numbers" not in _generated(None)
    with pytest.raises(UserError, match="recipes = true"):
        _generated(["sum-numbers"])
