"""The memory tools: ``remember``, ``recall``, ``forget`` and ``search_sessions``.

Writing memory is consequential: what is remembered comes back in later conversations, so
``remember.text`` and ``forget.query`` are checked by the data-flow gate (sandbox/flow.py) like
a mail's recipients. An entry written while untrusted content was in the conversation is stored
with where that content came from, stays out of the system prompt, and comes back from
``recall`` marked untrusted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from agent.dataflow import Evidence
from agent.errors import ToolError
from agent.provenance import Provenance
from agent.run_context import current_run
from agent.tools import ContentPart, Tool, ToolResult, function_tool
from skills.context import SkillContext
from skills.guard import with_rule
from skills.memory.config import MemorySettings
from skills.memory.recall import rank
from skills.memory.session_index import Hit, SessionIndex
from skills.memory.store import MAX_ENTRY, Entry, MemoryStore
from skills.memory.user_words import (
    asks_about_user,
    asks_to_remember,
    fact_clause,
    kept_text,
    this_turn_request,
)
from skills.skill import DefaultRules

MEMORY_RULES = DefaultRules(
    allow=["memory.remember", "memory.recall", "memory.forget", "memory.search"]
)
# The arguments the data-flow gate checks word by word once untrusted content was read.
MEMORY_CONSEQUENTIAL = {"memory.remember": ["text"], "memory.forget": ["query"]}
# Tools the small-model profile does not show its narrow model (see cli/wiring.py).
NOT_FOR_SMALL_MODELS = ("forget", "search_sessions")
# What offers a memory tool to the small model: its descriptions share words with everyday
# chat ("today", "help"), and a small model calls whatever it is offered. A request to keep a
# fact offers `remember`, a question about what the user told offers `recall`; never both,
# and each alone (cli/wiring.py): the cue says the message is memory's.
SMALL_MODEL_CUES: dict[str, Callable[[str], bool]] = {
    "remember": asks_to_remember,
    "recall": asks_about_user,
}
INDEX_FILE = "sessions-index.sqlite3"
MAX_RECALLED = 8
MAX_FORGET = 5
MAX_HITS = 20


def memory_folder(data_dir: Path, settings: MemorySettings | None = None) -> Path:
    """Where the memory files live: the configured folder, else ``memory`` in the data folder."""
    if settings is not None and settings.folder is not None:
        return settings.folder
    return data_dir / "memory"


def session_index(
    data_dir: Path, sessions_dir: Path | None = None, settings: MemorySettings | None = None
) -> SessionIndex:
    """The full-text index of the sessions folder, kept in the data folder. A memory kept in
    a folder of its own (an eval's empty one) has its own index and past sessions there."""
    if settings is not None and settings.folder is not None:
        return SessionIndex(settings.folder / INDEX_FILE, settings.folder / "sessions")
    return SessionIndex(data_dir / INDEX_FILE, sessions_dir or data_dir / "sessions")


def make_memory_tools(context: SkillContext) -> list[Tool]:
    """The memory tools, or none when memory is off or there is no data folder."""
    settings = context.options.get("memory")
    if not isinstance(settings, MemorySettings) or not settings.enabled:
        return []
    if context.data_dir is None:
        return []
    store = MemoryStore(memory_folder(context.data_dir, settings))
    index = session_index(context.data_dir, context.options.get("sessions_dir"), settings)
    own_words = bool(settings.user_words)

    def remember(
        text: Annotated[
            str, Field(min_length=1, max_length=MAX_ENTRY, description="one short sentence")
        ],
        kind: Annotated[
            Literal["fact", "profile", "note"],
            Field(description="profile: who the user is, a preference or standing instruction"),
        ] = "fact",
    ) -> str:
        """Remember something for later conversations: a fact, who the user is, a preference or
        a standing instruction (kind profile), or a note for today."""
        source = untrusted_source()
        clause = fact_clause(request) if own_words and (request := user_request()) else None
        entry = store.add(kept_text(text, clause) if clause else text, kind, source)
        marked = f" (marked as coming from {source})" if source else ""
        return f"remembered in {entry.file}{marked}: {entry.text}"

    def recall(
        query: Annotated[str, Field(description="words to look for; empty: the latest")] = "",
    ) -> ToolResult:
        """Recall what you know about the user from earlier conversations: their name, what
        they like, their instructions, facts and notes."""
        entries = store.entries()
        if own_words and (request := user_request()):
            query = f"{query} {request}"  # the question names what it asks better than a 135M
        found = (
            rank(entries, query, MAX_RECALLED)
            if query.strip()
            else [e for e in entries if e.kind != "note"][-MAX_RECALLED:]
        )
        if not found:
            return ToolResult.text(f"nothing remembered matches {query!r}")
        return recalled(found)

    def forget(
        query: Annotated[str, Field(min_length=3, description="an entry, or text it contains")],
    ) -> str:
        """Forget remembered entries that contain this text (they are kept in the history)."""
        matches = store.matching(query)
        if not matches:
            raise ToolError(f"nothing remembered contains {query!r}; recall to see the entries")
        if len(matches) > MAX_FORGET:
            shown = "\n".join(e.line.strip() for e in matches[:MAX_FORGET])
            raise ToolError(
                f"{len(matches)} entries contain {query!r}; quote the one to forget:\n{shown}"
            )
        removed = store.forget(matches)
        return "forgot:\n" + "\n".join(f"{e.file}: {e.line.strip()}" for e in removed)

    def search_sessions(
        query: Annotated[str, Field(min_length=1, description="words to look for")],
        limit: Annotated[int, Field(ge=1, le=MAX_HITS, description="best first")] = 8,
    ) -> ToolResult:
        """Search past conversations (sessions) for words: what was said or done before."""
        index.update()
        return found_in_sessions(index.search(query, limit), query)

    return [
        with_rule(function_tool(remember), "memory.remember", "other"),
        with_rule(function_tool(recall), "memory.recall", "read"),
        with_rule(function_tool(forget), "memory.forget", "other"),
        with_rule(function_tool(search_sessions), "memory.search", "read"),
    ]


def user_request() -> str | None:
    """The user's message this run's turn began with (None outside a run)."""
    run = current_run()
    return this_turn_request(run.messages) if run is not None else None


def untrusted_source() -> str:
    """Where the untrusted content in this run's conversation came from ("" if none): the
    sources, newest first, at most three."""
    run = current_run()
    if run is None:
        return ""
    labels = [label.describe() for _text, label in reversed(Evidence.of(run.messages).untrusted)]
    distinct = list(dict.fromkeys(labels))
    more = f" and {len(distinct) - 3} more" if len(distinct) > 3 else ""
    return "; ".join(distinct[:3]) + more


def recalled(entries: list[Entry]) -> ToolResult:
    """Entries as the model reads them; those from untrusted content fenced as such."""
    own = [f"{e.file}: {e.line.strip()}" for e in entries if not e.source]
    marked = [f"{e.file}: {e.line.strip()}" for e in entries if e.source]
    parts = [ContentPart("\n".join(own))] if own else []
    if marked:
        parts += [
            ContentPart("written while untrusted content was read:"),
            ContentPart("\n".join(marked), untrusted=True),
        ]
        sources = ", ".join(dict.fromkeys(e.source for e in entries if e.source))
        label = Provenance(kind="tool", origin=f"recall (from {sources})", trusted=False)
        return ToolResult(tuple(parts), provenance=label)
    return ToolResult(tuple(parts))


def found_in_sessions(hits: list[Hit], query: str) -> ToolResult:
    """Session search hits; untrusted ones fenced, with their label beside them."""
    if not hits:
        return ToolResult.text(f"no past session mentions {query!r}")
    parts = []
    labels = []
    for hit in hits:
        where = f"{hit.session} #{hit.seq} ({hit.role})"
        if hit.label:
            labels.append(hit.label)
            parts += [
                ContentPart(f"{where} [{hit.label}]:"),
                ContentPart(hit.excerpt, untrusted=True),
            ]
        else:
            parts.append(ContentPart(f"{where}: {hit.excerpt}"))
    if not labels:
        return ToolResult(tuple(parts))
    origin = "search_sessions (" + "; ".join(dict.fromkeys(labels)) + ")"
    return ToolResult(
        tuple(parts), provenance=Provenance(kind="tool", origin=origin, trusted=False)
    )
