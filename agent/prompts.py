"""Prompts are versioned data files inside the package, loaded with importlib.resources."""

from __future__ import annotations

from importlib import resources


def load_prompt(name: str = "system") -> str:
    """The text of ``agent/prompts/NAME.md``."""
    return (
        resources.files("agent")
        .joinpath("prompts", f"{name}.md")
        .read_text(encoding="utf-8")
        .strip()
    )
