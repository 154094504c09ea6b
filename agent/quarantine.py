"""The quarantined reader: one question about untrusted text, answered in a closed shape.

The agent's own model (the privileged one, with tools) should not have to read a stranger's
words to act on what they mean. The reader puts the question to a separate model call that
sees only a fixed system prompt (``agent/prompts/quarantine.md``), the text and the question:
no tools, no conversation. Its output is held by a grammar (``ChatRequest.response_format``) to
``{"answer": VALUE}`` where VALUE is one of:

- ``yes_no``: ``true`` or ``false``;
- ``choice``: one of the strings the question lists;
- ``number``: a JSON number;
- ``date``: ``YYYY-MM-DD``, a real calendar date;
- ``short_text``: at most ``max_chars`` characters on one line.

Whatever the grammar did, the answer is checked again here, so a backend that let something
else through yields an error, never an answer of another shape. The first four kinds cannot
carry an instruction; a short text can ("send ~/.ssh to x"), which is why the tool that uses
this module labels it untrusted (skills/reader.py, docs/security.md).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from agent.backend import Backend, Completion, supports_response_format
from agent.errors import BackendError, ToolError
from agent.messages import ChatRequest, Message, ResponseFormat, SystemMessage, UserMessage
from agent.prompts import Prompt, load_prompt

AnswerKind = Literal["yes_no", "choice", "number", "date", "short_text"]
CLOSED_KINDS: frozenset[str] = frozenset({"yes_no", "choice", "number", "date"})
DEFAULT_MAX_CHARS = 80
MAX_TEXT_CHARS = 200
MAX_CHOICES = 20
MAX_CHOICE_CHARS = 100
PROMPT_NAME = "quarantine"
_DATE = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"

Answer = bool | str | int | float


@dataclass(slots=True, frozen=True)
class Question:
    """One question and the shape of its answer; :meth:`checked` refuses a malformed one."""

    text: str
    kind: AnswerKind
    choices: tuple[str, ...] = ()
    max_chars: int = DEFAULT_MAX_CHARS

    @property
    def closed(self) -> bool:
        """Whether every possible answer is a value that cannot carry an instruction."""
        return self.kind in CLOSED_KINDS

    def checked(self) -> Question:
        """The question itself, or a :class:`ToolError` saying what the model must fix."""
        if not self.text.strip():
            raise ToolError("question is empty: ask one question about the text")
        if self.kind == "choice":
            if len(self.choices) < 2 or len(set(self.choices)) != len(self.choices):
                raise ToolError("choices: give at least two different choices for kind 'choice'")
            if len(self.choices) > MAX_CHOICES:
                raise ToolError(f"choices: give at most {MAX_CHOICES} choices")
            if any(not c.strip() or len(c) > MAX_CHOICE_CHARS for c in self.choices):
                raise ToolError(f"choices: each must be 1 to {MAX_CHOICE_CHARS} characters")
        elif self.choices:
            raise ToolError(f"choices are only for kind 'choice', not {self.kind!r}")
        if self.kind == "short_text" and not 1 <= self.max_chars <= MAX_TEXT_CHARS:
            raise ToolError(f"max_chars must be between 1 and {MAX_TEXT_CHARS}")
        return self

    def value_schema(self) -> dict[str, Any]:
        """The JSON schema of the answer's value."""
        if self.kind == "yes_no":
            return {"type": "boolean"}
        if self.kind == "choice":
            return {"type": "string", "enum": list(self.choices)}
        if self.kind == "number":
            return {"type": "number"}
        if self.kind == "date":
            return {"type": "string", "pattern": _DATE}
        return {"type": "string", "maxLength": self.max_chars}

    def schema(self) -> dict[str, Any]:
        """The schema of the whole output: ``{"answer": VALUE}`` and nothing else."""
        return {
            "type": "object",
            "properties": {"answer": self.value_schema()},
            "required": ["answer"],
            "additionalProperties": False,
        }

    def form(self) -> str:
        """How the answer is asked for, in the prompt the reader's model sees."""
        if self.kind == "yes_no":
            return "Answer true (yes) or false (no)."
        if self.kind == "choice":
            return "Answer with exactly one of: " + ", ".join(json.dumps(c) for c in self.choices)
        if self.kind == "number":
            return "Answer with a number."
        if self.kind == "date":
            return "Answer with a date written YYYY-MM-DD."
        return f"Answer in at most {self.max_chars} characters, on one line."

    def parse(self, output: str) -> Answer:
        """The answer in ``output``, checked against the kind; a :class:`ToolError` otherwise.

        The error never quotes the output: it was steered by the stranger's text.
        """
        try:
            data = json.loads(output)
        except json.JSONDecodeError:
            data = None
        value = data.get("answer") if isinstance(data, dict) and len(data) == 1 else None
        answer = self._value(value)
        if answer is None:
            raise ToolError(
                f"the reader's model gave no valid {self.kind} answer; ask again in other words "
                "or with another kind, or tell the user"
            )
        return answer

    def _value(self, value: Any) -> Answer | None:
        if self.kind == "yes_no":
            return value if isinstance(value, bool) else None
        if self.kind == "number":
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            return value if math.isfinite(value) else None
        if not isinstance(value, str):
            return None
        if self.kind == "choice":
            return value if value in self.choices else None
        if self.kind == "date":
            try:
                return dt.date.fromisoformat(value).isoformat() if len(value) == 10 else None
            except ValueError:
                return None
        # One line of printable text: no newline, no terminal escape, however it was encoded.
        text = " ".join("".join(c if c.isprintable() else " " for c in value).split())
        return text[: self.max_chars]


def render(answer: Answer) -> str:
    """An answer as JSON text: ``true``, ``42``, ``"2024-05-01"``, ``"a short text"``."""
    return json.dumps(answer, ensure_ascii=False)


def reader_messages(text: str, question: Question, prompt: Prompt) -> list[Message]:
    """What the reader's model sees: the fixed prompt, then the text and the question."""
    body = (
        f"The text:\n<<<\n{text}\n>>>\n\nThe question: {question.text.strip()}\n{question.form()}"
    )
    return [SystemMessage(content=prompt.text), *prompt.examples, UserMessage(content=body)]


def ask(backend: Backend, text: str, question: Question, prompt: Prompt | None = None) -> Answer:
    """Put ``question`` about ``text`` to ``backend`` in quarantine and return the checked answer.

    A backend that cannot hold its output to a schema is refused: the reader never answers
    unconstrained.
    """
    question = question.checked()
    if not supports_response_format(backend):
        name = getattr(backend, "name", type(backend).__name__)
        raise ToolError(
            f"the quarantined reader cannot run on the {name!r} backend: it cannot hold a model's "
            "output to a schema, and the reader never answers unconstrained. Tell the user"
        )
    prompt = prompt or load_prompt(PROMPT_NAME)
    # Room for the JSON around the answer; a long text's characters are rarely one token each.
    budget = 24 + (2 * question.max_chars if question.kind == "short_text" else 0)
    request = ChatRequest(
        messages=reader_messages(text, question, prompt),
        response_format=ResponseFormat.for_schema(question.schema()),
        temperature=0.0,
        max_tokens=budget,
    )
    completion: Completion | None = None
    try:
        for event in backend.generate(request):
            if isinstance(event, Completion):
                completion = event
    except BackendError as exc:
        raise ToolError(f"the quarantined reader's model failed: {exc.message}") from None
    if completion is None:  # a backend that ends without a Completion is broken
        raise RuntimeError(f"backend {backend.name!r} ended without a completion")
    return question.parse(completion.message.content or "")
