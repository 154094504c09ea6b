"""Prompts are versioned data files inside the package, loaded with importlib.resources.

Each prompt is ``agent/prompts/ID.md``: YAML-like front matter (``id``, ``version``,
``description``) between ``---`` lines, then the system prompt text. A trace records the id and
version of the prompt a run used, so two versions can be compared on a task suite.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from agent.errors import UserError

DEFAULT_PROMPT = "default"


@dataclass(slots=True, frozen=True)
class Prompt:
    """One versioned system prompt."""

    id: str
    version: str
    text: str
    description: str = ""

    @property
    def label(self) -> str:
        """``id@version``, as traces and eval reports name it."""
        return f"{self.id}@{self.version}"


def parse_prompt(source: str, fallback_id: str) -> Prompt:
    """A :class:`Prompt` from a file's text (front matter optional)."""
    meta: dict[str, str] = {}
    body = source
    if source.startswith("---\n"):
        end = source.find("\n---\n", 4)
        if end >= 0:
            for line in source[4:end].splitlines():
                key, sep, value = line.partition(":")
                if sep:
                    meta[key.strip()] = value.strip().strip("\"'")
            body = source[end + 5 :]
    return Prompt(
        id=meta.get("id", fallback_id),
        version=meta.get("version", "0"),
        text=body.strip(),
        description=meta.get("description", ""),
    )


def load_prompt(name: str = DEFAULT_PROMPT) -> Prompt:
    """The prompt ``name``: a bundled id (``agent/prompts/NAME.md``) or a path to a .md file."""
    path = Path(name).expanduser()
    if name.endswith(".md") and path.is_file():
        return parse_prompt(path.read_text(encoding="utf-8"), path.stem)
    file = resources.files("agent").joinpath("prompts", f"{name}.md")
    if not file.is_file():
        raise UserError(
            f"unknown prompt {name!r}: choose one of {', '.join(bundled_prompts())} "
            "or give the path of a .md file"
        )
    return parse_prompt(file.read_text(encoding="utf-8"), name)


def bundled_prompts() -> list[str]:
    """The ids of the prompts shipped with clawloop."""
    folder = resources.files("agent").joinpath("prompts")
    return sorted(p.name[:-3] for p in folder.iterdir() if p.name.endswith(".md"))
