"""The ``[memory]`` config table: whether memory is on, and how much of it every prompt carries."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class MemorySettings(BaseModel):
    """``[memory]``: the remember/recall tools, the session search, the prompt's share."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        default=True, description="offer the memory tools and put memory in the system prompt"
    )
    prompt_chars: int = Field(
        default=1200,
        ge=0,
        description="at most this many characters of memory in every system prompt (0: none)",
    )
    user_words: bool | None = Field(
        default=None,
        description=(
            "remember stores the fact in the user's own words and recall searches with the "
            "user's question (unset: on for the small-model profile)"
        ),
    )
    folder: Path | None = Field(
        default=None,
        description="where memory and its session index live (unset: memory/ in the data folder)",
    )
