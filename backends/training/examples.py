"""Chat examples to token ids with a loss mask: the runtime's own chat template and tool
rendering, and only the assistant's tokens trained.

An example is one line of the OpenAI chat fine-tuning format, ``{"messages": [...], "tools":
[...]}``; an assistant message with ``"weight": 0`` is shown but not trained. The rendering is
stable (each turn renders to the same text whatever follows), so the text an assistant turn adds
is the difference between the prompt up to it and the conversation through it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.errors import UserError
from agent.messages import ToolSpec, parse_message
from backends.local.chat_template import ChatTemplate

IGNORE = -100  # the label cross-entropy skips


@dataclass(slots=True)
class Encoded:
    """One example's token ids and labels (IGNORE where the token is not trained)."""

    ids: list[int]
    labels: list[int]

    @property
    def trained(self) -> int:
        """How many tokens carry a loss."""
        return sum(1 for x in self.labels if x != IGNORE)


def read_examples(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """Every example in these JSONL files; a bad line is a UserError naming it."""
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError(f"no data file {path}: export one with `agent traces export`") from None
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                example = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}:{number} is not JSON ({exc.msg})") from None
            if not isinstance(example, dict) or not isinstance(example.get("messages"), list):
                raise UserError(f"{path}:{number} has no messages list")
            yield example


def encode(
    example: dict[str, Any],
    template: ChatTemplate,
    tokenize: Callable[[str], list[int]],
    max_tokens: int = 2048,
) -> Encoded | None:
    """Token ids and labels for one example, or None if it has nothing to train or is too long."""
    raw = [dict(m) for m in example["messages"]]
    weights = [m.pop("weight", 1) for m in raw]
    messages = [parse_message(m) for m in raw]
    tools = [ToolSpec.model_validate(t) for t in example.get("tools") or []] or None
    ids: list[int] = []
    labels: list[int] = []
    done = ""
    for i, message in enumerate(messages):
        if message.role != "assistant":
            continue
        prompt = template.render(messages[:i], tools, add_generation_prompt=True)
        full = template.render(messages[: i + 1], tools, add_generation_prompt=False)
        if not prompt.startswith(done) or not full.startswith(prompt):
            raise UserError("the chat template does not render turns stably; cannot train on it")
        shown = tokenize(prompt[len(done) :])
        said = tokenize(full[len(prompt) :])
        ids += shown + said
        trained = weights[i] not in (0, 0.0)
        labels += [IGNORE] * len(shown) + (said if trained else [IGNORE] * len(said))
        done = full
    result = Encoded(ids, labels)
    if not result.trained or len(ids) > max_tokens:
        return None
    return result
