"""The saved sessions `agent web`'s /sessions page shows, read as `agent sessions list` and
`agent sessions search` read them."""

from __future__ import annotations

from cli.config import Settings
from cli.sessions_cmd import saved_sessions
from connectors.web.sessions import SessionHit, SessionRow, Sessions
from skills.memory.tools import MAX_HITS, session_index


def web_sessions(settings: Settings) -> Sessions:
    """The list and the full-text search over ``settings``' sessions folder."""

    def listed() -> list[SessionRow]:
        return [
            SessionRow(s.name, s.first[:200], s.messages, s.changed.strftime("%Y-%m-%d %H:%M"))
            for s in saved_sessions(settings.sessions_dir)
        ]

    def search(query: str) -> list[SessionHit]:
        index = session_index(settings.data_dir, settings.sessions_dir, settings.memory)
        index.update()  # as the command does: the index catches up with the folder first
        return [
            SessionHit(h.session, h.seq, h.role, h.label, h.excerpt)
            for h in index.search(query, MAX_HITS)
        ]

    return Sessions(listed, search)
