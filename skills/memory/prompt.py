"""The bounded part of memory at the end of a system prompt, as the memory is now."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skills.memory.recall import prompt_block, with_block
from skills.memory.store import MemoryStore


@dataclass(slots=True, frozen=True)
class MemoryPrompt:
    """Gives a system prompt the memory block as the memory folder holds it now.

    Called with a prompt, it returns the prompt carrying today's block in place of the one it
    carried (the loop's ``refresh_system``, a new session's system prompt).
    """

    folder: Path
    chars: int

    def block(self) -> str:
        """The memory block, at most ``chars`` characters ("" when memory is empty)."""
        return prompt_block(MemoryStore(self.folder), self.chars)

    def __call__(self, system: str) -> str:
        return with_block(system, self.block())
