"""Finding memory entries for a question, and the bounded part of memory every prompt carries.

Recall ranks entries by the words they share with the question, rarer words counting more
(as the tool selector ranks tools), the profile a little ahead of facts and facts of notes, the
newer ahead on a tie. The prompt block holds the profile first, then the newest facts, whole
lines only, cut to a bound; entries written while untrusted content was in the conversation
stay out of it, since the system prompt is read as the user's own trusted words.
"""

from __future__ import annotations

import math

from agent.session import SUMMARY_HEADING
from agent.tool_selection import words
from skills.memory.store import FACTS_FILE, PROFILE_FILE, Entry, MemoryStore

_KIND_BONUS = {"profile": 0.3, "fact": 0.2, "note": 0.0}
PROMPT_OPEN = "<memory>\nWhat you remember about the user (the recall tool finds more):"
PROMPT_CLOSE = "</memory>"


def _same(a: str, b: str) -> bool:
    """One word for recall: equal, or one a prefix of four letters or more of the other."""
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    return len(short) >= 4 and long.startswith(short)


def rank(entries: list[Entry], query: str, limit: int) -> list[Entry]:
    """The ``limit`` entries that best match ``query``; none when no word matches."""
    terms = set(words(query))
    if not terms:
        return []
    docs = [set(words(f"{e.text} {e.source}")) for e in entries]
    weight = {}
    for term in terms:
        df = sum(1 for doc in docs if any(_same(term, w) for w in doc))
        weight[term] = math.log(1 + len(docs) / df) if df else 0.0
    scored = []
    for entry, doc in zip(entries, docs, strict=True):
        score = sum(w for t, w in weight.items() if w and any(_same(t, x) for x in doc))
        if score > 0:
            scored.append((score + _KIND_BONUS[entry.kind], entry.date, entry))
    scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
    return [entry for _score, _date, entry in scored[:limit]]


def prompt_block(store: MemoryStore, bound: int) -> str:
    """Memory for the system prompt, at most ``bound`` characters; "" when there is none."""
    room = bound - len(PROMPT_OPEN) - len(PROMPT_CLOSE) - 2  # the two newlines around the lines
    if room <= 0:
        return ""
    own = [e for e in store.entries([PROFILE_FILE, FACTS_FILE]) if _fits_prompt(e)]
    chosen: list[str] = []
    for entry in (e for e in own if e.kind == "profile"):
        line = _prompt_line(entry)
        if len(line) + 1 > room:
            break
        chosen.append(line)
        room -= len(line) + 1
    recent: list[str] = []
    for entry in reversed([e for e in own if e.kind == "fact"]):
        line = _prompt_line(entry)
        if len(line) + 1 > room:
            break
        recent.append(line)
        room -= len(line) + 1
    lines = chosen + recent[::-1]  # oldest first: a new fact extends the block at its end
    if not lines:
        return ""
    return "\n".join([PROMPT_OPEN, *lines, PROMPT_CLOSE])


def _fits_prompt(entry: Entry) -> bool:
    return not entry.source and "memory>" not in entry.text


def _prompt_line(entry: Entry) -> str:
    # Without its date: digits cost a token each, and a fact's date is what recall is for.
    return f"- {entry.text}"


def with_block(system: str, block: str) -> str:
    """``system`` carrying ``block`` in place of the memory block it has: at the same place, so a
    compaction summary after it stays; before the summary, or at the end, where it has none;
    none at all when ``block`` is empty."""
    start = system.find(PROMPT_OPEN)
    end = system.find(PROMPT_CLOSE, start) if start >= 0 else -1
    if end >= 0:
        before, after = system[:start].rstrip("\n"), system[end + len(PROMPT_CLOSE) :]
        return "\n\n".join(p for p in (before, block, after.lstrip("\n")) if p)
    if not block:
        return system
    cut = system.find(SUMMARY_HEADING)
    if cut >= 0:
        return "\n\n".join(p for p in (system[:cut].rstrip("\n"), block, system[cut:]) if p)
    return f"{system}\n\n{block}" if system else block
