"""What the user asked memory for, read from the user's own message rather than the model's.

A 135M model told "Remember that my cat is called Pixel" may call ``remember("Pixel is called
Pixel")``, and asked "What is my cat called?" may recall ``"cat"``. Plain string work does
better at both, so the small-model profile leans on it:

- :func:`asks_to_remember`: the message asks to keep something ("remember that ...",
  "note that ...", "don't forget ...") or states a fact about the user ("my X is Y"), and is
  not a question. :func:`fact_clause` is then the fact in the user's words, the request's
  words ("please remember that") left out.
- :func:`asks_about_user`: a question about what the user told before ("what is my ...",
  "do you remember ...", "what did I say about ..."), not about files.
- :func:`kept_text`: what ``remember`` stores: the model's text where it is the user's own
  words (a run of at least most of the clause), else the clause; either labelled as the user's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from agent.messages import Message

USER_LABEL = "the user said: "
# "remember that", "please note:", "don't forget", "keep in mind that", "make a note that".
_ASK = re.compile(
    r"\b(?:remember|note|make a note|keep in mind|don'?t forget|do not forget|never forget)"
    r"(?:\s+(?:that|this))?\s*[:,-]?\s+(?P<fact>\S.*)$",
    re.IGNORECASE | re.DOTALL,
)
# "my cat is called Pixel", "my parents' names are Ann and Bo", "my flight's at 9".
_MY_FACT = re.compile(
    r"\bmy\s+[\w'-]+(?:\s+[\w'-]+){0,5}?(?:\s+(?:is|are|was|were|has|have)\b|'s\b)\s*\S",
    re.IGNORECASE,
)
_QUESTION_START = re.compile(
    r"^(?:what|what's|whats|who|who's|whom|whose|where|where's|when|when's|which|how|why|"
    r"do|does|did|is|are|was|were|have|has|had|tell me|remind me|recall)\b",
    re.IGNORECASE,
)
# A question about the user: it speaks of the user, or of what they told.
_ABOUT_USER = re.compile(
    r"\b(?:my|me|i|mine|i'm|i've)\b|\bremember\b|\brecall\b|\btold you\b", re.IGNORECASE
)
# A file's name (notes.txt, ./report.py) or the workspace's words ("how many folders have I
# got in here?"): a question about files is work for the file tools.
_FILE_NAME = re.compile(r"\b[\w-]+\.[A-Za-z][\w]{0,4}\b")
_WORKSPACE = re.compile(
    r"\b(?:files?|folders?|director(?:y|ies)|here|workspace|scripts?|lines?)\b", re.IGNORECASE
)
_PLEASANTRY = re.compile(
    r"^(?:thanks|thank you|thx|please|ok|okay|cheers|great)\b[\s\w,!.]*$", re.IGNORECASE
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def is_question(text: str) -> bool:
    """Whether ``text`` asks something: it ends with "?" or opens as a question does; a request
    put as one ("can you remember that ...?") is not a question."""
    stripped = text.strip()
    opening = re.sub(r"^(?:hey|hi|hello|ok|okay|so|and|but)\b[\s,!]*", "", stripped, flags=re.I)
    if re.match(
        r"^(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:remember|note|keep)\b",
        opening,
        re.IGNORECASE,
    ):
        return False
    return stripped.endswith("?") or bool(_QUESTION_START.match(opening))


def asks_to_remember(text: str) -> bool:
    """Whether the message asks to keep a fact, or tells one about the user."""
    return fact_clause(text) is not None


def asks_about_user(text: str) -> bool:
    """Whether the message asks what the user told before (not about a file)."""
    if _FILE_NAME.search(text) or _WORKSPACE.search(text):
        return False
    # The question itself speaks of the user: "I saw `uptime` in a guide. What does it do?"
    # asks about a command, not about what the user told.
    asked = [s for s in _SENTENCE.split(text.strip()) if s and is_question(s)]
    return any(_ABOUT_USER.search(s) for s in asked)


def fact_clause(text: str) -> str | None:
    """The fact a request to remember gives, in the user's words; None when it gives none."""
    if is_question(text):
        return None
    asked = _ASK.search(text)
    if asked is not None:
        return _trimmed(asked["fact"])
    told = [s for s in _SENTENCE.split(text.strip()) if _MY_FACT.search(s) and "?" not in s]
    return _trimmed(" ".join(told)) if told else None


def kept_text(model_text: str, clause: str) -> str:
    """What to store for a request whose fact is ``clause``: the model's text where it is a run
    of the user's own words holding most of the clause, else the clause; labelled as the
    user's words."""
    mine, theirs = _words(model_text), _words(clause)
    own = bool(mine) and _is_run(mine, theirs) and len(mine) * 5 >= len(theirs) * 3
    chosen = " ".join(model_text.split()) if own else clause
    return chosen if chosen.startswith(USER_LABEL) else f"{USER_LABEL}{chosen}"


def this_turn_request(messages: Sequence[Message]) -> str | None:
    """The user's message this turn began with: the first after the latest final answer (the
    loop's own notes to the model, a call it could not read, come later)."""
    start = 0
    for at, message in enumerate(messages):
        if message.role == "assistant" and not getattr(message, "tool_calls", None):
            start = at + 1
    for message in messages[start:]:
        if message.role == "user" and isinstance(message.content, str):
            return message.content
    return None


def _trimmed(fact: str) -> str | None:
    """The fact without its closing pleasantries ("... Thanks!") and end punctuation."""
    sentences = [s for s in _SENTENCE.split(" ".join(fact.split())) if s]
    while len(sentences) > 1 and _PLEASANTRY.match(sentences[-1]):
        sentences.pop()
    kept = " ".join(sentences).rstrip(" .!?,;:")
    kept = re.sub(r",?\s*(?:please|thanks|thank you)$", "", kept, flags=re.IGNORECASE)
    return kept or None


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _is_run(part: list[str], whole: list[str]) -> bool:
    """Whether ``part`` appears in ``whole`` as consecutive words."""
    n = len(part)
    return any(whole[i : i + n] == part for i in range(len(whole) - n + 1))
