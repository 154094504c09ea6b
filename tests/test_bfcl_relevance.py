"""bench/bfcl_relevance.py: reading BFCL's live files, and the selection and rarity gate it
measures, on hand-written cases (the live files themselves are not vendored)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.bfcl import _profile_selector, answer_tool_spec
from bench.bfcl_relevance import load_live, offered, rarity_gate

WEATHER: dict[str, Any] = {
    "name": "weather.get_forecast",
    "description": "The weather forecast for a city.",
    "parameters": {
        "type": "dict",
        "properties": {"city": {"type": "string", "description": "The city."}},
        "required": ["city"],
    },
}


def _write_live(folder: Path) -> Path:
    (folder / "possible_answer").mkdir(parents=True)
    cases = [
        ("live_simple_0-0-0", "What is the weather forecast for Lyon?"),
        ("live_simple_1-0-1", "Sing me a song about the sea."),
        ("live_simple_2-0-2", "Get me a pizza."),
    ]
    with (folder / "BFCL_v4_live_simple.json").open("w") as fh:
        for id_, text in cases:
            question = [
                [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]
            ]
            fh.write(json.dumps({"id": id_, "question": question, "function": [WEATHER]}) + "\n")
    with (folder / "possible_answer" / "BFCL_v4_live_simple.json").open("w") as fh:
        for id_, _ in cases:
            truth = [{"weather.get_forecast": {"city": ["Lyon"]}}]
            fh.write(json.dumps({"id": id_, "ground_truth": truth}) + "\n")
    return folder


def test_live_cases_carry_the_expected_function_names_as_offered(tmp_path: Path) -> None:
    cases = load_live(_write_live(tmp_path), "live_simple")
    assert [c.id for c, _ in cases] == [f"live_simple_{i}-0-{i}" for i in range(3)]
    assert all(names == {"weather_get_forecast"} for _, names in cases)  # "." as the schema has it
    assert cases[0][0].question[-1]["content"].startswith("What is the weather")


def test_selection_offers_the_function_only_when_the_question_matches_it(tmp_path: Path) -> None:
    (matching, _), (unrelated, _), (light, _) = load_live(_write_live(tmp_path), "live_simple")
    answer = answer_tool_spec()
    assert offered(_profile_selector(), matching, answer) == {"weather_get_forecast"}
    assert offered(_profile_selector(), unrelated, answer) == set()
    assert offered(_profile_selector(), light, answer) == {"weather_get_forecast"}  # "get"


def test_the_rarity_gate_keeps_a_weighty_match_and_drops_a_light_one(tmp_path: Path) -> None:
    (matching, _), _, (light, _) = load_live(_write_live(tmp_path), "live_simple")
    names = {"weather_get_forecast"}
    gate = rarity_gate(5.0)
    assert gate(matching, names) == names  # "weather" and "forecast" together weigh over 5
    assert gate(light, names) == set()  # "get" alone, a common word, weighs less
    assert rarity_gate(0.0)(light, names) == names
    assert rarity_gate(1000.0)(matching, names) == set()
