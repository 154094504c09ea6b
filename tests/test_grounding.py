"""Calls built from made-up values are not run (agent/grounding.py and the loop's use of it);
the fake backend stands in for the model."""

from __future__ import annotations

import copy

from agent.events import FinalEvent, ToolResultEvent
from agent.grounding import Grounds, made_up
from agent.loop import AgentLoop
from agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from agent.session import Session
from agent.tools import Toolbox, function_tool
from backends.fake import FakeBackend

SCHEMA = {
    "type": "object",
    "properties": {
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "limit": {"type": "integer", "default": 10},
        "stops": {"type": "array", "items": {"type": "string", "enum": ["Nice"]}},
    },
}


def missing(args: dict[str, object], said: str) -> list[str]:
    return made_up(args, SCHEMA, Grounds(said))


def test_values_the_user_gave_are_found_in_any_case_and_as_words() -> None:
    said = "Book 3 seats on the 16th from Portland to Seattle, 15% off; the file is Notes.txt"
    args = {"from": "portland", "to": "Seattle, WA", "seats": 3, "day": 16, "off": 0.15}
    assert missing({**args, "file": "notes.txt", "name": "note"}, said) == []


def test_invented_places_dates_and_numbers_are_named() -> None:
    said = "I'm bored, can you find me something to do?"
    args = {"city": "Los Angeles, CA", "date": "2022-01-01", "people": 4, "kind": "Music"}
    assert missing(args, said) == [
        "city='Los Angeles, CA'",
        "date='2022-01-01'",
        "people=4",
        "kind='Music'",
    ]


def test_words_joined_by_underscores_are_words() -> None:
    said = "What is my name? And the DB host?"
    assert missing({"query": "my_name", "key": "db_host"}, said) == []


def test_number_words_count_as_numbers() -> None:
    assert missing({"tickets": 3, "times": 2}, "three tickets, and ask twice") == []
    assert missing({"tickets": 5}, "three tickets") == ["tickets=5"]


def test_numbers_are_read_with_exponents_and_scale_words() -> None:
    said = "two charges of 1e-9 and 2E-9 at 0.05; 8.5 million square km, 213 million people"
    args = {"q1": 1e-09, "q2": 2e-09, "d": 0.05, "area": 8500000, "people": 213000000}
    assert missing(args, said) == []
    assert missing({"area": 8.5, "people": 213}, said) == []  # the numbers as written too
    assert missing({"q": 1e-08, "people": 213000}, said) == ["q=1e-08", "people=213000"]


def test_composed_text_enums_defaults_and_booleans_are_not_checked() -> None:
    args = {
        "command": "find . -mindepth 1 -type d",
        "unit": "celsius",
        "limit": 10,
        "verbose": True,
    }
    assert missing(args, "show me every folder") == []
    assert missing({"limit": 11}, "show me every folder") == ["limit=11"]


def test_what_the_model_writes_may_be_a_word_nobody_said() -> None:
    said = "greet.py fails: name 'pirnt' is not defined. Fix the typo."
    assert missing({"path": "greet.py", "old": "pirnt", "new": "print"}, said) == []
    assert missing({"content": "hello", "command": "ls", "line": "x = 1"}, said) == []
    assert missing({"path": "greet.py", "old": "prnt", "new": "print"}, said) == ["old='prnt'"]


def test_nested_values_are_checked_with_their_own_schema() -> None:
    args = {"trip": {"stops": ["Lyon", "Nice"]}, "stops": ["Nice"]}
    assert missing(args, "stop in Lyon") == ["trip.stops[]='Nice'"]


def test_the_grounds_are_the_system_user_and_tool_text_not_the_models_own_words() -> None:
    messages = [
        SystemMessage(content="The user's name is Ada."),
        UserMessage(content="what is in notes.txt?"),
        AssistantMessage(content="I will say Bob", tool_calls=[ToolCall.make("x", {"a": "Eve"})]),
        ToolMessage(tool_call_id="1", name="x", content="port = 8421"),
    ]
    grounds = Grounds.of(messages)
    assert made_up({"who": "Ada", "port": 8421}, None, grounds) == []
    assert made_up({"who": "Bob"}, None, grounds) == ["who='Bob'"]
    assert made_up({"who": "Eve"}, None, grounds) == ["who='Eve'"]


def book_bus(from_city: str, to_city: str) -> str:
    """Buy a bus ticket between two cities."""
    ran.append((from_city, to_city))
    return f"Booked {from_city} to {to_city}."


def answer(text: str) -> str:
    """Reply to the user."""
    return text


ran: list[tuple[str, str]] = []


def call(name: str, **args: object) -> AssistantMessage:
    return AssistantMessage(content=None, tool_calls=[ToolCall.make(name, args)])


def loop(backend: FakeBackend, grounded: bool) -> AgentLoop:
    box = Toolbox([function_tool(book_bus), function_tool(answer)])
    return AgentLoop(backend, box, answer_tool="answer", grounded_calls=grounded)


def test_a_made_up_call_is_not_run_and_only_the_answer_is_offered_next() -> None:
    ran.clear()
    backend = FakeBackend(
        [
            call("book_bus", from_city="New York, NY", to_city="Los Angeles, CA"),
            call("answer", text="Where are you going?"),
        ]
    )
    events = list(loop(backend, True).run(Session(), "I'm bored. Find me a bus somewhere?"))
    assert ran == []
    [result] = [e for e in events if isinstance(e, ToolResultEvent)]
    assert result.decided_by == "grounding" and not result.ok
    assert "from_city='New York, NY'" in result.content and "to_city=" in result.content
    assert [r.allowed_tools for r in backend.requests][1] == ["answer"]
    assert [e.content for e in events if isinstance(e, FinalEvent)] == ["Where are you going?"]


def test_a_call_from_the_users_words_runs_and_the_switch_turns_the_check_off() -> None:
    ran.clear()
    task = "Book me a bus from Portland to Seattle."
    backend = FakeBackend(
        [call("book_bus", from_city="Portland", to_city="Seattle"), call("answer", text="Done.")]
    )
    list(loop(backend, True).run(Session(), task))
    assert ran == [("Portland", "Seattle")]
    guessed = [call("book_bus", from_city="Boston", to_city="Seattle"), call("answer", text="ok")]
    list(loop(FakeBackend(guessed), False).run(Session(), task))
    assert ran == [("Portland", "Seattle"), ("Boston", "Seattle")]


def test_what_the_memory_holds_counts_as_said() -> None:
    ran.clear()
    backend = FakeBackend(
        [call("book_bus", from_city="Portland", to_city="Seattle"), call("answer", text="Done.")]
    )
    box = Toolbox([function_tool(book_bus), function_tool(answer)])
    loop = AgentLoop(
        backend,
        box,
        system_prompt="You help.",
        answer_tool="answer",
        grounded_calls=True,
        refresh_system=lambda text: f"{text}\nMemory: the user lives in Portland.",
    )
    list(loop.run(Session(), "Book my usual bus to Seattle."))
    assert ran == [("Portland", "Seattle")]


def read_file(path: str) -> str:
    """Read a file."""
    ran.append(("read_file", path))
    return "text"


def test_a_workspace_file_nobody_named_is_a_guess_although_the_request_lists_it() -> None:
    ran.clear()

    def workspace(specs: list[ToolSpec]) -> list[ToolSpec]:
        # As skills/workspace_enums.py does: a copy, the tool's own schema left as it is.
        specs = copy.deepcopy(specs)
        for spec in specs:
            if spec.function.name == "read_file":
                spec.function.parameters["properties"]["path"]["enum"] = ["notes.txt", "todo.md"]
        return specs

    box = Toolbox([function_tool(read_file), function_tool(answer)], refine=workspace)
    guessed = [call("read_file", path="todo.md"), call("answer", text="Hello!")]
    backend = FakeBackend(guessed)
    events = list(
        AgentLoop(backend, box, answer_tool="answer", grounded_calls=True).run(
            Session(), "Hi! How are you doing?"
        )
    )
    assert (
        "todo.md" in backend.requests[0].tools[0].function.parameters["properties"]["path"]["enum"]
    )
    assert ran == []
    assert [e.decided_by for e in events if isinstance(e, ToolResultEvent)] == ["grounding"]
    named = [call("read_file", path="todo.md"), call("answer", text="Done.")]
    list(
        AgentLoop(FakeBackend(named), box, answer_tool="answer", grounded_calls=True).run(
            Session(), "What does todo.md say?"
        )
    )
    assert ran == [("read_file", "todo.md")]
