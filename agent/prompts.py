"""Prompts are versioned data files inside the package, loaded with importlib.resources.

Each prompt is ``agent/prompts/ID.md``: YAML-like front matter (``id``, ``version``,
``description``) between ``---`` lines, then the system prompt text, then optional worked
examples, each under a ``## example`` heading, one turn per line::

    ## example
    user: How many lines are in todo.txt?
    call: count_lines {"path": "todo.txt"}
    result: todo.txt has 4 lines.
    call: answer {"text": "todo.txt has 4 lines."}

(``assistant: TEXT`` is a plain reply.) The examples are sent as real turns after the system
prompt, so a small model sees exactly the shape its own turns will have. A trace records the id
and version of the prompt a run used, so two versions can be compared on a task suite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from agent.errors import UserError
from agent.messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage

DEFAULT_PROMPT = "default"


@dataclass(slots=True, frozen=True)
class Prompt:
    """One versioned system prompt."""

    id: str
    version: str
    text: str
    description: str = ""
    examples: list[Message] = field(default_factory=list)

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
    text, *shots = body.split("\n## example\n")
    prompt_id = meta.get("id", fallback_id)
    return Prompt(
        id=prompt_id,
        version=meta.get("version", "0"),
        text=text.strip(),
        description=meta.get("description", ""),
        examples=[
            m for i, shot in enumerate(shots) for m in parse_example(shot, f"{prompt_id}-{i}")
        ],
    )


def parse_example(text: str, tag: str) -> list[Message]:
    """The turns of one worked example (a malformed line is the prompt author's bug)."""
    messages: list[Message] = []
    pending: ToolCall | None = None
    for n, line in enumerate(text.strip().splitlines()):
        role, sep, rest = line.partition(": ")
        if not sep:
            raise ValueError(f"example {tag}: line {n + 1} is not 'role: text': {line!r}")
        if role == "user":
            messages.append(UserMessage(content=rest))
        elif role == "assistant":
            messages.append(AssistantMessage(content=rest))
        elif role == "call":
            name, _, arguments = rest.partition(" ")
            pending = ToolCall.make(name, arguments or "{}", call_id=f"call_example_{tag}_{n}")
            messages.append(AssistantMessage(content=None, tool_calls=[pending]))
        elif role == "result" and pending is not None:
            messages.append(
                ToolMessage(tool_call_id=pending.id, name=pending.function.name, content=rest)
            )
        else:
            raise ValueError(f"example {tag}: unknown role {role!r} on line {n + 1}")
    return messages


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
