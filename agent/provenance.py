"""Where a piece of the conversation came from, and whether its words may steer the agent.

Every tool result carries a :class:`Provenance` beside its content (on the ``ToolMessage`` and
in the session file, never in the text the model reads), so a mail that writes "this came from
the user" is still labelled as a mail. The label is set by the loop from the tool's own
declaration; nothing the model or a stranger writes can change it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

SourceKind = Literal["user", "workspace", "mail", "web", "mcp", "skill", "member", "tool"]

# How each kind reads in a sentence, with its origin and without one.
_WHAT: dict[str, tuple[str, str]] = {
    "user": ("the words of", "the user's own words"),
    "workspace": ("the workspace file", "a workspace file"),
    "mail": ("a mail from", "a mail"),
    "web": ("the web page", "a web page"),
    "mcp": ("a result of the MCP server", "an MCP result"),
    "skill": ("a result of the skill", "a skill's result"),
    "member": ("a message from the chat member", "a chat member's message"),
    "tool": ("a result of the tool", "a tool's result"),
}


class Provenance(BaseModel):
    """One source: what kind, which one (a sender, a URL, a server, a path), trusted or not."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: SourceKind
    origin: str = ""
    trusted: bool = True

    @classmethod
    def mail(cls, sender: str) -> Provenance:
        """Mail is written by strangers: untrusted, whoever the sender claims to be."""
        return cls(kind="mail", origin=sender, trusted=False)

    @classmethod
    def member(cls, who: str) -> Provenance:
        """A chat member who is not an owner may talk to the agent, but their words are not the
        owner's: untrusted."""
        return cls(kind="member", origin=who, trusted=False)

    @classmethod
    def mcp(cls, server: str) -> Provenance:
        return cls(kind="mcp", origin=server, trusted=False)

    @classmethod
    def web(cls, url: str) -> Provenance:
        return cls(kind="web", origin=url, trusted=False)

    @classmethod
    def workspace(cls, path: str, trusted: bool = True) -> Provenance:
        return cls(kind="workspace", origin=path, trusted=trusted)

    @classmethod
    def tool(cls, name: str, trusted: bool = True) -> Provenance:
        return cls(kind="tool", origin=name, trusted=trusted)

    def untrusted(self) -> Provenance:
        """The same source, marked untrusted (a result that holds untrusted parts)."""
        return self if not self.trusted else self.model_copy(update={"trusted": False})

    def describe(self) -> str:
        """For people: "a mail from x@example.org", "the workspace file downloads/a.txt"."""
        with_origin, alone = _WHAT[self.kind]
        return f"{with_origin} {self.origin}" if self.origin else alone


USER = Provenance(kind="user")
