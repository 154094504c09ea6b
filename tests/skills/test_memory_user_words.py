"""The small profile's memory reads the user's own message: a request to remember stores the
fact in the user's words whatever the model wrote, and recall searches with the user's question.
Through the real loop, tools and files, with the fake backend playing the model's mistakes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from memory_support import memory_toolbox

from agent.events import Event, ToolResultEvent
from agent.loop import AgentLoop
from agent.messages import AssistantMessage, ToolCall
from agent.session import Session
from backends.fake import FakeBackend
from skills.memory.config import MemorySettings
from skills.memory.store import MemoryStore
from skills.memory.user_words import (
    USER_LABEL,
    asks_about_user,
    asks_to_remember,
    fact_clause,
    kept_text,
)


@pytest.mark.parametrize(
    ("message", "fact"),
    [
        ("Remember that my cat is called Pixel.", "my cat is called Pixel"),
        ("Please note that the meeting moved to Friday. Thanks!", "the meeting moved to Friday"),
        ("Hi! Remember this: the garage code is 4471.", "the garage code is 4471"),
        ("Don't forget my sister's name is Ingrid", "my sister's name is Ingrid"),
        ("Can you remember that my flight leaves at 7:45?", "my flight leaves at 7:45"),
        ("keep in mind that I am vegetarian", "I am vegetarian"),
        (
            "My name is Zorblat and my cat is called Pixel.",
            "My name is Zorblat and my cat is called Pixel",
        ),
        ("hello. My daughter Lena was born in 2015.", "My daughter Lena was born in 2015"),
    ],
)
def test_the_fact_is_taken_from_the_users_words(message: str, fact: str) -> None:
    assert asks_to_remember(message)
    assert fact_clause(message) == fact


@pytest.mark.parametrize(
    "message",
    [
        "What is my cat called?",
        "Do you remember my sister's name?",
        "how are you?",
        "Thanks, that is all for today!",
        "How many lines are in notes.txt?",
        "Which file mentions my name?",
        "ok, nice",
    ],
)
def test_questions_and_chat_are_not_requests_to_remember(message: str) -> None:
    assert not asks_to_remember(message)


@pytest.mark.parametrize(
    ("message", "about_user"),
    [
        ("What is my cat called?", True),
        ("what's my favourite colour?", True),
        ("Do you remember where I parked?", True),
        ("What did I say about the wifi?", True),
        ("Who am I?", True),
        ("Tell me my name", True),
        ("What did I write on the bottom line of journal.txt?", False),  # a file's question
        ("How many lines are in notes.txt?", False),
        ("how many directories have I got in here?", False),  # the workspace's question
        ("Remember that my cat is called Pixel.", False),  # a request, not a question
        ("hello!", False),
    ],
)
def test_questions_about_the_user_are_told_from_the_rest(message: str, about_user: bool) -> None:
    assert asks_about_user(message) is about_user


def test_the_models_text_is_kept_only_where_it_is_the_users_words() -> None:
    clause = "my cat is called Pixel"
    assert kept_text("Pixel is called Pixel", clause) == f"{USER_LABEL}my cat is called Pixel"
    assert kept_text("cat", clause) == f"{USER_LABEL}my cat is called Pixel"  # too little
    assert kept_text("cat is called Pixel", clause) == f"{USER_LABEL}cat is called Pixel"
    assert kept_text("the user's cat is Pixel", clause) == f"{USER_LABEL}{clause}"


def _loop(tmp_path: Path, *calls: tuple[str, dict[str, Any]], own_words: bool) -> AgentLoop:
    box = memory_toolbox(tmp_path, memory=MemorySettings(user_words=own_words))
    turns = [AssistantMessage(tool_calls=[ToolCall.make(n, a)]) for n, a in calls]
    return AgentLoop(FakeBackend([*turns, AssistantMessage(content="ok")]), box)


def _run(loop: AgentLoop, task: str) -> list[Event]:
    return list(loop.run(Session(), task))


def test_remember_stores_the_users_words_not_the_models_paraphrase(tmp_path: Path) -> None:
    wrong = ("remember", {"text": "Pixel is called Pixel"})
    _run(_loop(tmp_path, wrong, own_words=True), "Remember that my cat is called Pixel.")
    [entry] = MemoryStore(tmp_path / "data" / "memory").entries()
    assert entry.text == "the user said: my cat is called Pixel"
    assert entry.source == ""  # the user's own words: trusted, in the prompt's memory block


def test_without_user_words_the_models_text_is_stored_as_it_was(tmp_path: Path) -> None:
    wrong = ("remember", {"text": "Pixel is called Pixel"})
    _run(_loop(tmp_path, wrong, own_words=False), "Remember that my cat is called Pixel.")
    [entry] = MemoryStore(tmp_path / "data" / "memory").entries()
    assert entry.text == "Pixel is called Pixel"


def test_recall_searches_with_the_users_question_too(tmp_path: Path) -> None:
    vague = ("recall", {"query": "pet"})  # a word no entry holds
    seen = {}
    for own_words in (True, False):
        home = tmp_path / str(own_words)
        memory = MemoryStore(home / "data" / "memory")
        memory.add("the user said: my cat is called Pixel")
        memory.add("the user said: my gym is on Elm Street")
        events = _run(_loop(home, vague, own_words=own_words), "What is my cat called?")
        [result] = [e for e in events if isinstance(e, ToolResultEvent)]
        seen[own_words] = result.content
    assert "Pixel" in seen[True] and "Elm" not in seen[True]
    assert "nothing remembered matches 'pet'" in seen[False]
