"""The reading, counting, arithmetic and searching families: every draw's gold solution passes
through the real loop, skills and sandbox; its check fails on the untouched workspace; and at
every step the gold call's tool is among those the small profile offers the model."""

from __future__ import annotations

import random
import re
import tempfile
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agent.messages import ChatRequest, ToolMessage
from backends.fake import FakeBackend
from cli.config import load_settings
from cli.evals.checks import failures
from cli.evals.generators import gold as gold_module
from cli.evals.generators.curriculum import Curriculum
from cli.evals.generators.families import FAMILIES
from cli.evals.generators.families_read import READ_FAMILIES
from cli.evals.generators.gold import run_gold
from skills.simple import ANSWER_TOOL

DRAWS = 8
CATALOGUE = Path(__file__).resolve().parents[2] / "cli" / "evals" / "generators" / "catalogue.yaml"


class RecordingBackend(FakeBackend):
    """The scripted backend ``run_gold`` uses, remembered so its requests can be read."""

    made: ClassVar[list[RecordingBackend]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        RecordingBackend.made.append(self)


def _offered(request: ChatRequest) -> set[str]:
    shown = {t.function.name for t in request.tools or []}
    return shown if request.allowed_tools is None else shown & set(request.allowed_tools)


def test_families_are_in_the_catalogue_and_none_is_held_out() -> None:
    import yaml

    entries = {f["name"]: f for f in yaml.safe_load(CATALOGUE.read_text())["families"]}
    for name in READ_FAMILIES:
        assert name in entries and not entries[name].get("held_out"), name
        assert FAMILIES[name] is READ_FAMILIES[name]


@pytest.mark.parametrize("family", list(READ_FAMILIES))
def test_gold_passes_with_offered_tools_and_the_start_fails(
    family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = [READ_FAMILIES[family](random.Random(seed)) for seed in range(DRAWS)]
    assert len({(g.prompt, *sorted(g.files.items())) for g in made}) == DRAWS, "tasks repeat"
    for gold in made:
        with tempfile.TemporaryDirectory() as start:
            for rel, text in gold.files.items():
                (Path(start) / rel).parent.mkdir(parents=True, exist_ok=True)
                (Path(start) / rel).write_text(text, encoding="utf-8")
            assert failures(gold.check, Path(start), "", 0), gold.prompt
        if gold.check.answer_regex is not None:
            assert not re.search(gold.check.answer_regex, gold.prompt), gold.prompt
    curriculum = Curriculum([(g.task(f"{family}-{i}"), g) for i, g in enumerate(made)])
    RecordingBackend.made = []
    monkeypatch.setattr(gold_module, "FakeBackend", RecordingBackend)
    runs = list(
        run_gold(curriculum, load_settings({"data_dir": tmp_path, "small.command_tool": True}))
    )
    for run, gold, backend in zip(runs, made, RecordingBackend.made, strict=True):
        assert run.result.failures == [], (gold.prompt, gold.calls, run.result.failures)
        tools = [c.name for c in gold.calls] + [ANSWER_TOOL]
        assert len(backend.requests) == len(tools)
        for request, tool in zip(backend.requests, tools, strict=True):
            assert tool in _offered(request), (gold.prompt, tool, sorted(_offered(request)))
        # The answer the generator computed is what the real command printed.
        seen = backend.requests[-1].messages[-1]
        assert isinstance(seen, ToolMessage)
        assert re.search(gold.check.answer_regex or "", seen.content), (gold.prompt, seen.content)
