"""The structured-file, editing, file, script, multi-step and chat families: each family's gold
solution passes through the real loop, skills and sandbox, its tool is offered to the model at
every step, and its check fails on the untouched starting workspace."""

from __future__ import annotations

import random
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

import cli.evals.generators.gold as gold_module
from backends.fake import FakeBackend
from cli.config import load_settings
from cli.evals.checks import failures
from cli.evals.generators.base import Generated
from cli.evals.generators.curriculum import Curriculum
from cli.evals.generators.families import FAMILIES
from cli.evals.generators.families_change import CHANGE_FAMILIES
from cli.evals.generators.gold import gold_turns, run_gold

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = yaml.safe_load(
    (ROOT / "cli" / "evals" / "generators" / "catalogue.yaml").read_text(encoding="utf-8")
)["families"]
DRAWS = 8


def _drawn(family: str, draws: int = DRAWS) -> list[Generated]:
    return [CHANGE_FAMILIES[family](random.Random(seed)) for seed in range(draws)]


def _start(workspace: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text, encoding="utf-8")
    return workspace


def _step_problem(request: Any, name: str) -> str | None:
    shown = [t.function.name for t in request.tools or []]
    if name not in shown:
        return f"{name} is not among the tools shown, {shown}"
    if request.allowed_tools is not None and name not in request.allowed_tools:
        return f"{name} is shown but may not be called (only {request.allowed_tools})"
    return None


@pytest.mark.parametrize("family", list(CHANGE_FAMILIES))
def test_gold_passes_with_offered_tools(
    family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _drawn(family)
    curriculum = Curriculum([(g.task(f"gen-{family}-{i}"), g) for i, g in enumerate(made)])
    backends: list[FakeBackend] = []

    class Recording(FakeBackend):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            backends.append(self)

    monkeypatch.setattr(gold_module, "FakeBackend", Recording)
    # The gold calls are the run_command profile's (recipes solve these families by search).
    profile = {"data_dir": tmp_path, "small.command_tool": True, "small.recipes": False}
    runs = list(run_gold(curriculum, load_settings(profile)))
    for run, backend, gold in zip(runs, backends, made, strict=True):
        assert run.result.failures == [], (gold.prompt, backend.requests[-1].messages[-2:])
        turns = gold_turns(gold)
        assert len(backend.requests) == len(turns), gold.prompt
        for request, turn in zip(backend.requests, turns, strict=True):
            name = (turn.tool_calls or [])[0].function.name
            assert _step_problem(request, name) is None, (gold.prompt, _step_problem(request, name))
        # One example per step, or one for the whole run where each step is a prefix of the next.
        assert len(run.examples) in {1, len(turns)}


@pytest.mark.parametrize("family", list(CHANGE_FAMILIES))
def test_check_fails_on_the_untouched_workspace(family: str) -> None:
    for gold in _drawn(family, 8):
        with tempfile.TemporaryDirectory() as start:
            workspace = _start(Path(start), gold.files)
            assert failures(gold.check, workspace, "", 0), gold.prompt


@pytest.mark.parametrize("family", list(CHANGE_FAMILIES))
def test_draws_vary_and_answers_are_not_in_the_prompt(family: str) -> None:
    made = _drawn(family, 12)
    assert {g.family for g in made} == {family}
    assert len({g.prompt for g in made}) >= 6, [g.prompt for g in made]
    for gold in made:
        regex = gold.check.answer_regex
        if regex is not None:
            assert not re.search(regex, gold.prompt), (gold.prompt, regex)


def test_families_are_the_catalogues_and_none_is_held_out() -> None:
    held_out = {f["name"] for f in CATALOGUE if f.get("held_out")}
    known = {f["name"] for f in CATALOGUE}
    assert set(CHANGE_FAMILIES) <= known
    assert not set(CHANGE_FAMILIES) & held_out
    assert set(CHANGE_FAMILIES) <= set(FAMILIES)
    assert len(CHANGE_FAMILIES) == 37
