"""Compaction: when the next request would pass its budget, older turns become a summary.

The loop asks :meth:`Compactor.check` before every model call. The request's size is
estimated from its characters, at a tokens-per-character rate measured on this conversation's
own earlier requests (the backend reports the prompt tokens it really took). Past the budget,
every turn before the latest ``keep_turns`` user turns is summarised; the cut always falls
just before a user message, so a tool call and its result are never split, and the turns kept
are kept whole. The session records the compaction and keeps every message on disk.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass
from typing import Literal

from agent.backend import Backend, Completion
from agent.events import CompactedEvent
from agent.fit import fit_results
from agent.messages import ChatRequest, Message, SystemMessage, ToolMessage, UserMessage
from agent.prompts import Prompt
from agent.session import Compaction, Session
from agent.summary import (
    extractive_summary,
    transcript_lines,
    untrusted_sources,
    with_names,
)

log = logging.getLogger(__name__)

# Tokens per character before a request has been measured: on the high side for English and
# JSON (about 3 to 4 characters per token), so the first estimate errs toward compacting.
FIRST_RATE = 0.34
# The summary takes at most this share of the budget, so that a compacted window leaves room
# for several turns before the next compaction (each one changes the prompt's prefix).
SUMMARY_SHARE = 0.25


@dataclass(slots=True)
class CompactionPolicy:
    """When to compact and how to write the summary."""

    budget_tokens: int  # compact when the next request is estimated above this
    keep_turns: int = 2  # the latest user turns are never compacted
    method: Literal["extractive", "model"] = "extractive"
    summary_chars: int = 2400  # the summary's bound (about 600 tokens)
    summary_tokens: int = 400  # what a model summary may generate


class Compactor:
    """Decides when a session's window is compacted, and writes its summary."""

    def __init__(
        self, policy: CompactionPolicy, backend: Backend | None = None, prompt: Prompt | None = None
    ) -> None:
        self.policy = policy
        self.backend = backend  # writes model summaries (the run's own backend)
        self.prompt = prompt  # the summary prompt, for model summaries
        self.rate = FIRST_RATE

    def estimate(self, request: ChatRequest) -> int:
        """The request's size in tokens, at this conversation's measured rate."""
        return int(_chars(request) * self.rate) + 1

    def observe(self, request: ChatRequest, prompt_tokens: int) -> None:
        """Learn the tokens-per-character rate from a request the backend measured."""
        chars = _chars(request)
        if prompt_tokens > 0 and chars > 0:
            self.rate = prompt_tokens / chars

    def check(self, session: Session, request: ChatRequest) -> CompactedEvent | None:
        """Compact ``session`` if ``request`` (its window) passes the budget; None if not
        needed or not possible (the turns left are all among the latest kept)."""
        before = self.estimate(request)
        if before <= self.policy.budget_tokens:
            return None
        upto = plan_cut(session.messages, session.compacted, self.policy.keep_turns)
        if upto is None:
            return None
        covered = session.messages[session.compacted : upto]
        summary, method = self._summary(session.summary, covered)
        session.compact(
            Compaction(
                upto=upto,
                summary=summary,
                method=method,
                prompt=self.prompt.label if method == "model" and self.prompt else "",
                at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                tokens_before=before,
                untrusted=_merged(session.compactions, untrusted_sources(covered)),
            )
        )
        after = request.model_copy(update={"messages": session.window()})
        return CompactedEvent(upto, method, before, self.estimate(after))

    def fit(self, request: ChatRequest) -> tuple[ChatRequest, int]:
        """``request`` within the budget, its tool results cut if compaction could not bring it
        there (agent/fit.py); and how many results were cut."""
        if self.estimate(request) <= self.policy.budget_tokens:
            return request, 0
        results = sum(len(m.content) for m in request.messages if isinstance(m, ToolMessage))
        others = _chars(request) - results
        room = int(self.policy.budget_tokens / max(self.rate, 1e-3)) - others
        return fit_results(request, max(room, 0))

    def summary_limit(self) -> int:
        """The summary's bound in characters: the configured one, within its share of the
        budget."""
        share = int(self.policy.budget_tokens * SUMMARY_SHARE / max(self.rate, 1e-3))
        return max(min(self.policy.summary_chars, share), 200)

    def _summary(self, previous: str | None, covered: list[Message]) -> tuple[str, str]:
        limit = self.summary_limit()
        if self.policy.method == "model" and self.backend is not None and self.prompt is not None:
            written = self._model_summary(previous, covered)
            if written is not None:
                return with_names(written, covered, previous)[:limit], "model"
        return extractive_summary(previous, [m for m in covered if m.role != "system"], limit), (
            "extractive"
        )

    def _model_summary(self, previous: str | None, covered: list[Message]) -> str | None:
        """The model's summary, or None when it fails or writes nothing usable."""
        assert self.backend is not None and self.prompt is not None
        lines = transcript_lines([m for m in covered if m.role != "system"])
        earlier = f"Summary so far:\n{previous}\n\n" if previous else ""
        request = ChatRequest(
            messages=[
                SystemMessage(content=self.prompt.text),
                UserMessage(content=f"{earlier}Conversation:\n" + "\n".join(lines)),
            ],
            temperature=0.0,
            max_tokens=self.policy.summary_tokens,
        )
        completion: Completion | None = None
        try:
            for event in self.backend.generate(request):
                if isinstance(event, Completion):
                    completion = event
        except Exception as exc:  # a failed summary falls back; the run goes on
            log.warning("the model's summary failed (%s); an extractive one is used", exc)
            return None
        text = (completion.message.content or "").strip() if completion else ""
        if completion is None or completion.finish_reason == "length" or len(text) < 20:
            return None
        return text


def plan_cut(messages: list[Message], compacted: int, keep_turns: int) -> int | None:
    """Where the summary ends: just before the ``keep_turns``-th user message from the end,
    and after what is already compacted. None: nothing more can be covered."""
    starts = [i for i, m in enumerate(messages) if isinstance(m, UserMessage) and i > compacted]
    if len(starts) <= keep_turns:
        return None
    cut = starts[-keep_turns] if keep_turns > 0 else len(messages)
    return cut if cut > max(compacted, 1) else None


def _merged(earlier: list[Compaction], found: list[str]) -> list[str]:
    """Every untrusted source the summary covers, the earlier compactions' included."""
    before = earlier[-1].untrusted if earlier else []
    return [*before, *(f for f in found if f not in before)]


def _chars(request: ChatRequest) -> int:
    return len(json.dumps(request.to_wire(), ensure_ascii=False))
