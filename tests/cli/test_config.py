"""Settings merge defaults, the TOML file, CLAWLOOP_* variables and flags, and say what is wrong."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from agent.errors import ConfigError
from agent.tool_selection import LexicalToolSelector
from agent.tools import Toolbox
from backends.fake import FakeBackend
from cli.config import add_rule, config_path, dump_toml, load_settings
from cli.wiring import build_loop


def write_config(text: str) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_a_file() -> None:
    settings = load_settings()
    assert settings.backend == "llamacpp"
    assert settings.max_steps == 12
    assert settings.sandbox.mode == "workspace-write"


def test_file_then_environment_then_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    write_config('backend = "fake"\nmax_steps = 5\n[decoding]\ntemperature = 0.7\n')
    assert load_settings().max_steps == 5
    monkeypatch.setenv("CLAWLOOP_MAX_STEPS", "7")
    settings = load_settings()
    assert (settings.backend, settings.max_steps, settings.decoding.temperature) == ("fake", 7, 0.7)
    assert load_settings({"max_steps": 9, "backend": None}).max_steps == 9


def test_invalid_value_names_key_and_line() -> None:
    path = write_config('backend = "fake"\n\nmax_steps = "many"\n')
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert "'max_steps'" in info.value.message
    assert f"{path}, line 3" in info.value.message


def test_unknown_key_is_reported() -> None:
    write_config("max_step = 3\n")
    with pytest.raises(ConfigError, match=r"max_step.*unknown key"):
        load_settings()


def test_broken_toml_is_one_clear_error() -> None:
    write_config("backend = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings()


def test_bad_environment_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWLOOP_MAX_STEPS", "zero")
    with pytest.raises(ConfigError, match="CLAWLOOP_MAX_STEPS"):
        load_settings()


def test_add_rule_keeps_the_rest_of_the_file() -> None:
    write_config(
        'backend = "fake"\n[sandbox]\nallow = ["shell(ls *)"]\n[backends.openai]\nbase_url = "http://127.0.0.1:8000/v1"\n'
    )
    add_rule("allow", "shell(git status*)")
    add_rule("allow", "shell(git status*)")  # no duplicate
    data = tomllib.loads(config_path().read_text())
    assert data["backend"] == "fake"
    assert data["sandbox"]["allow"] == ["shell(ls *)", "shell(git status*)"]
    assert data["backends"]["openai"]["base_url"] == "http://127.0.0.1:8000/v1"
    assert (
        load_settings({"backend": "openai"}).backend_options()["base_url"]
        == "http://127.0.0.1:8000/v1"
    )


def test_dump_toml_round_trips() -> None:
    data = {"a": 1, "b": 'x"y', "c": [1.5, "z"], "t": {"u": True, "n": {"deep": "v"}}}
    assert tomllib.loads(dump_toml(data)) == data


def test_loop_guards_are_on_for_the_small_profile_and_can_be_turned_on_for_others() -> None:
    assert load_settings({"profile": "small"}).guards_on
    assert load_settings({"backend": "llamacpp"}).guards_on  # the bundled model: small
    assert not load_settings({"profile": "standard"}).guards_on
    assert load_settings({"profile": "standard", "guards.enabled": True}).guards_on
    assert not load_settings({"profile": "small", "guards.enabled": False}).guards_on


def test_prices_follow_the_model_then_the_backend_then_the_default() -> None:
    write_config(
        "[usage]\nprice_prompt_per_mtok = 1.0\n"
        "[usage.models.openai]\nprice_prompt_per_mtok = 2.0\n"
        '[usage.models."gpt-x"]\nprice_prompt_per_mtok = 3.0\n'
    )
    usage = load_settings().usage
    places = [("openai", "gpt-x"), ("openai", "other"), ("llamacpp", None)]
    found = [usage.prices_for(backend, model) for backend, model in places]
    assert [p.price_prompt_per_mtok if p else None for p in found] == [3.0, 2.0, 1.0]


def test_how_recipes_are_offered_reaches_the_selector(tmp_path: Path) -> None:
    write_config("[small]\nrecipe_weight = 1.0\nrecipe_slots = 2\nrecipes_beside = true\n")
    settings = load_settings({"profile": "small", "workspace": tmp_path})
    select = build_loop(settings, FakeBackend(), Toolbox([])).select_tools
    assert isinstance(select, LexicalToolSelector)
    assert (select.secondary_weight, select.secondary_slots, select.beside) == (1.0, 2, True)
    write_config("[small]\nrecipe_slots = 9\n")
    with pytest.raises(ConfigError, match="recipe_slots"):
        load_settings()
