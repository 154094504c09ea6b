"""What the loop does for small models (answer tool, repeat guard, tool selection, examples),
a length finish, and an unreadable call; the fake backend stands in for the model."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from agent.backend import BackendEvent, Completion
from agent.events import ErrorEvent, Event, FinalEvent, StepEvent, ToolResultEvent
from agent.loop import AgentLoop
from agent.messages import AssistantMessage, ChatRequest, ToolCall, ToolSpec, UserMessage
from agent.prompts import load_prompt, parse_prompt
from agent.session import Session
from agent.tool_selection import LexicalToolSelector, words
from agent.tools import Toolbox, function_tool
from backends.fake import FakeBackend


def count_lines(path: str) -> str:
    """Count the lines of a file: how many lines it has."""
    return f"{path} has 3 lines."


def delete_file(path: str) -> str:
    """Delete or remove a file."""
    return f"Deleted {path}."


def answer(text: str) -> str:
    """Reply to the user."""
    return text


def call(name: str, **args: object) -> AssistantMessage:
    return AssistantMessage(content=None, tool_calls=[ToolCall.make(name, args)])


def run(loop: AgentLoop, task: str = "How many lines are in a.txt?") -> list[Event]:
    return list(loop.run(Session(), task))


def tools() -> Toolbox:
    return Toolbox([function_tool(f) for f in (count_lines, delete_file, answer)])


def picker(select: LexicalToolSelector, specs: list[ToolSpec]) -> Callable[[str], list[str]]:
    """The names of the tools ``select`` offers for a message, in the order they are shown."""

    def pick(text: str) -> list[str]:
        return [t.function.name for t in select([UserMessage(content=text)], specs)]

    return pick


def test_a_length_finish_is_an_error_not_an_answer() -> None:
    class Cut:
        name = "cut"

        def generate(self, request: ChatRequest) -> Iterator[BackendEvent]:
            yield Completion(AssistantMessage(content="It is a long sto"), finish_reason="length")

    events = run(AgentLoop(Cut(), Toolbox()))
    assert not [e for e in events if isinstance(e, FinalEvent)]
    [error] = [e for e in events if isinstance(e, ErrorEvent)]
    assert error.reason == "length" and "token limit" in error.message


def test_an_unreadable_call_gets_the_repair_hint_and_another_try() -> None:
    class Garbled:
        name = "garbled"

        def __init__(self) -> None:
            self.requests: list[ChatRequest] = []

        def generate(self, request: ChatRequest) -> Iterator[BackendEvent]:
            self.requests.append(request)
            if len(self.requests) == 1:
                yield Completion(
                    AssistantMessage(content="<tool_call>oops</tool_call>"),
                    raw_text="<tool_call>oops</tool_call>",
                    parse_error="error: your tool call could not be read. Write it as ...",
                )
            else:
                yield Completion(AssistantMessage(content="3"))

    backend = Garbled()
    events = run(AgentLoop(backend, tools()))
    assert [e.content for e in events if isinstance(e, FinalEvent)] == ["3"]
    retry = backend.requests[1].messages[-1]
    assert isinstance(retry, UserMessage) and "could not be read" in retry.content
    assert [e.parse_error is not None for e in events if isinstance(e, StepEvent)] == [True, False]


def test_the_answer_tool_ends_the_run_and_every_reply_must_be_a_call() -> None:
    backend = FakeBackend([call("count_lines", path="a.txt"), call("answer", text="3 lines.")])
    session = Session()
    events = list(AgentLoop(backend, tools(), answer_tool="answer").run(session, "count a.txt"))
    assert [e.content for e in events if isinstance(e, FinalEvent)] == ["3 lines."]
    assert all(r.tool_choice == "required" for r in backend.requests)
    assert session.messages[-1] == AssistantMessage(content="3 lines.")  # stored as plain text


def test_a_repeated_call_is_not_run_again_and_only_the_answer_is_offered_next() -> None:
    ran: list[str] = []

    def counted(path: str) -> str:
        """Count the lines of a file."""
        ran.append(path)
        return f"{path} has 3 lines."

    box = Toolbox([function_tool(counted, name="count_lines"), function_tool(answer)])
    backend = FakeBackend(
        [
            call("count_lines", path="a.txt"),
            call("count_lines", path="a.txt"),
            call("answer", text="a.txt has 3 lines."),
        ]
    )
    loop = AgentLoop(backend, box, answer_tool="answer", repeat_guard=True)
    events = run(loop)
    assert ran == ["a.txt"]
    second = [e for e in events if isinstance(e, ToolResultEvent)][1]
    assert second.decided_by == "repeat guard" and "a.txt has 3 lines." in second.content
    callable_ = [[t.function.name for t in r.callable_tools() or []] for r in backend.requests]
    assert callable_ == [["count_lines", "answer"], ["count_lines", "answer"], ["answer"]]
    # Every request shows the same tools, so the prompt keeps its prefix from step to step.
    shown = [[t.function.name for t in r.tools or []] for r in backend.requests]
    assert shown == [["count_lines", "answer"]] * 3
    assert [t["function"]["name"] for t in backend.requests[2].to_wire()["tools"]] == ["answer"]


def test_looking_first_holds_the_answer_back_but_still_shows_it() -> None:
    backend = FakeBackend(
        [call("count_lines", path="a.txt"), call("answer", text="a.txt has 3 lines.")]
    )
    select = LexicalToolSelector(k=1, always=["answer"], look_first=True)
    loop = AgentLoop(backend, tools(), answer_tool="answer", select_tools=select)
    events = run(loop, "how many lines are in a.txt?")
    assert [e.content for e in events if isinstance(e, FinalEvent)] == ["a.txt has 3 lines."]
    shown = [[t.function.name for t in r.tools or []] for r in backend.requests]
    assert shown == [["count_lines", "answer"]] * 2
    assert [r.allowed_tools for r in backend.requests] == [["count_lines"], None]


def test_tool_selection_offers_the_matching_tools_and_only_the_answer_for_chat() -> None:
    specs = tools().specs()
    select = LexicalToolSelector(k=1, always=["answer"])
    pick = [t.function.name for t in select([UserMessage(content="how many lines in x?")], specs)]
    assert pick == ["count_lines", "answer"]
    pick = [t.function.name for t in select([UserMessage(content="remove old.log")], specs)]
    assert pick == ["delete_file", "answer"]
    assert [t.function.name for t in select([UserMessage(content="hi there!")], specs)] == [
        "answer"
    ]


def count_lines_with(path: str, word: str) -> str:
    """Count how many lines of a file contain a word."""
    return path + word


def count_characters(path: str) -> str:
    """Count the characters of a file."""
    return path


def test_secondary_tools_come_only_where_they_match_clearly_better_and_within_their_slots() -> None:
    fns = (count_lines, delete_file, count_lines_with, count_characters, answer)
    specs = Toolbox([function_tool(f) for f in fns]).specs()
    recipes = ["count_lines_with", "count_characters"]

    def pick(text: str, **kw: object) -> list[str]:
        select = LexicalToolSelector(k=3, always=["answer"], secondary=recipes, **kw)  # type: ignore[arg-type]
        return picker(select, specs)(text)

    # As a plain tool the recipe would be offered; as a secondary one it must match at least as
    # well as count_lines after its weight, and here it does not.
    assert pick("count the lines of a.txt", secondary_weight=1.0) == [
        "count_lines", "count_lines_with", "answer"
    ]  # fmt: skip
    assert pick("count the lines of a.txt") == ["count_lines", "answer"]
    # It also comes where it holds every word the best narrow tool holds, and more: "contain"
    # is a word count_lines does not have.
    assert pick("how many lines in a.txt contain foo") == [
        "count_lines", "count_lines_with", "answer"
    ]  # fmt: skip
    assert pick("how many lines in a.txt contain foo", covering=False) == ["count_lines", "answer"]
    # Where it matches better it comes beside the narrow tool, within its slots.
    assert pick("count lines of a.txt that contain foo") == [
        "count_lines", "count_lines_with", "answer"
    ]  # fmt: skip
    assert pick("count lines of a.txt that contain foo", secondary_slots=0) == [
        "count_lines", "answer"
    ]  # fmt: skip
    # Once offered it is judged by its whole score: count_lines matches less than half as well.
    assert pick("count the characters of a.txt") == ["count_characters", "answer"]
    assert pick("hi there!") == ["answer"]


def test_recipes_beside_keep_the_narrow_tools_k() -> None:
    fns = (count_lines, delete_file, count_lines_with, count_characters, answer)
    specs = Toolbox([function_tool(f) for f in fns]).specs()
    recipes = ["count_lines_with", "count_characters"]

    def pick(text: str, beside: bool) -> list[str]:
        select = LexicalToolSelector(k=1, always=["answer"], secondary=recipes, beside=beside)
        return picker(select, specs)(text)

    # In place, the recipe takes the one slot; beside, the narrow tool keeps it and the recipe
    # comes too.
    assert pick("count lines of a.txt that contain foo", beside=False) == [
        "count_lines_with", "answer"
    ]  # fmt: skip
    assert pick("count lines of a.txt that contain foo", beside=True) == [
        "count_lines", "count_lines_with", "answer"
    ]  # fmt: skip
    # Beside or not, a recipe that is not admitted does not come.
    assert pick("count the lines of a.txt", beside=True) == ["count_lines", "answer"]


def make_folder(path: str) -> str:
    """Make a new folder (directory)."""
    return path


def make_executable(path: str) -> str:
    """Make a file or script executable: chmod +x, give it permission to run."""
    return path


def test_a_recipe_holding_the_narrow_tools_words_and_more_is_offered() -> None:
    fns = (make_folder, count_lines, make_executable, answer)
    specs = Toolbox([function_tool(f) for f in fns]).specs()
    # A weight at which the recipe's score alone would not bring it here.
    select = LexicalToolSelector(
        k=3, always=["answer"], secondary=["make_executable"], secondary_weight=0.3
    )
    pick = picker(select, specs)
    # make_folder matches "make", make_executable "make" and "executable": it comes, and
    # make_folder, matching less than half as well, drops out.
    assert pick("make deploy.sh executable") == ["make_executable", "answer"]
    select.covering = False
    assert pick("make deploy.sh executable") == ["make_folder", "answer"]
    select.covering = True
    # Where the recipe holds only the narrow tool's words, the narrow tool stays alone.
    assert pick("make a folder called logs") == ["make_folder", "answer"]


def copy_file(path: str, new_name: str) -> str:
    """Copy a file to a new name."""
    return path + new_name


def replace_text(path: str, old: str, new: str) -> str:
    """Replace a word or text by another in a file."""
    return path + old + new


def list_files(folder: str) -> str:
    """List the files of a folder."""
    return folder


def test_each_step_of_a_request_keeps_its_best_tool_past_k() -> None:
    fns = (copy_file, replace_text, list_files, count_lines, answer)
    specs = Toolbox([function_tool(f) for f in fns]).specs()
    select = LexicalToolSelector(k=1, always=["answer"])
    pick = picker(select, specs)
    two_steps = "copy notes.txt as list.txt, then replace the word dragon by mirror in list.txt"
    assert pick(two_steps) == ["replace_text", "answer"]  # one tool: the copy is lost
    select.steps = True
    assert sorted(pick(two_steps)) == ["answer", "copy_file", "replace_text"]
    assert sorted(pick("copy a.txt to b.txt; replace cat by dog in b.txt")) == [
        "answer", "copy_file", "replace_text"
    ]  # fmt: skip
    # A request of one step is left as it was, and a step matching no tool adds none.
    assert pick("replace the word dragon by mirror in list.txt") == ["replace_text", "answer"]
    assert pick("replace the word dragon in a.txt and b.txt") == ["replace_text", "answer"]


def sum_numbers(path: str) -> str:
    """Add up the numbers in a file."""
    return path


def sum_numbers_in_both(path: str, other: str) -> str:
    """Add up the numbers in two files."""
    return path + other


def test_the_best_match_is_shown_last_nearest_the_message() -> None:
    # A small model leans to the tool it read last: the best match is shown there, the answer
    # tool after all of them.
    fns = (answer, count_characters, count_lines_with, count_lines, delete_file)
    specs = Toolbox([function_tool(f) for f in fns]).specs()
    select = LexicalToolSelector(k=3, always=["answer"])
    pick = picker(select, specs)
    assert pick("count lines of a.txt that contain foo") == [
        "count_lines", "count_lines_with", "answer"
    ]  # fmt: skip
    # count_characters is first among the specs and the best match: shown after the others.
    offered = pick("count the characters of a.txt, not the lines")
    assert offered[-2:] == ["count_characters", "answer"] and len(offered) == 4


def test_among_equal_matches_the_tool_taking_as_many_files_as_named_wins() -> None:
    specs = Toolbox([function_tool(f) for f in (sum_numbers, sum_numbers_in_both, answer)]).specs()
    for spec in specs[:2]:  # the workspace's files, as the toolbox offers them
        for prop in spec.function.parameters["properties"].values():
            prop["enum"] = ["a.txt", "b.txt"]
    select = LexicalToolSelector(
        k=1, always=["answer"], secondary=["sum_numbers", "sum_numbers_in_both"]
    )
    pick = picker(select, specs)
    assert pick("add up the numbers in a.txt and b.txt") == ["sum_numbers_in_both", "answer"]
    assert pick("add up the numbers in b.txt") == ["sum_numbers", "answer"]


def largest_file() -> str:
    """Find the largest file in the workspace's top folder."""
    return ""


def test_a_question_for_the_model_itself_gets_no_recipe() -> None:
    # "What's" and "workspace's" share a lone "s"; "largest" is one shared word with no file
    # named and no narrow tool matching: neither makes the question a task for a recipe (a
    # model made to look first would run it).
    fns = (count_lines, delete_file, largest_file, answer)
    specs = Toolbox([function_tool(f) for f in fns]).specs()
    select = LexicalToolSelector(k=3, always=["answer"], secondary=["largest_file"])
    pick = picker(select, specs)
    assert words("What's the workspace's top folder?") == ["workspace", "top", "folder"]
    assert pick("What's the French for flower?") == ["answer"]
    assert pick("what is the largest planet in our solar system?") == ["answer"]
    # A request that names a file of the workspace still gets it.
    specs[0].function.parameters["properties"]["path"]["enum"] = ["notes.txt"]
    assert pick("what is the largest file here besides notes.txt?") == ["largest_file", "answer"]


def run_command(command: str) -> str:
    """Run a shell command line."""
    return command


def test_the_general_tool_comes_with_any_match_or_a_named_file_and_never_for_chat() -> None:
    specs = Toolbox([function_tool(f) for f in (count_lines, run_command, answer)]).specs()
    # The workspace's files, as the toolbox offers them to a grammar-constrained model.
    specs[0].function.parameters["properties"]["path"]["enum"] = ["nums.txt", "docs/"]
    select = LexicalToolSelector(k=1, always=["answer"], general=["run_command"])
    pick = picker(select, specs)
    assert pick("how many lines in x?") == ["run_command", "count_lines", "answer"]
    # No tool's words match "largest number", but the message names a workspace file.
    assert pick("What is the largest number in nums.txt?") == ["run_command", "answer"]
    assert pick("what is in docs?") == ["run_command", "answer"]
    # A name that is only part of a longer word is not the file.
    assert pick("tell me about bignums.txt2 and wordocs") == ["answer"]
    assert pick("what is in nums.txt.bak?") == ["answer"]  # another file
    assert pick("hi there!") == ["answer"]
    never = LexicalToolSelector(k=1, always=["answer"], never=["run_command"])
    assert [t.function.name for t in never([UserMessage(content="nums.txt?")], specs)] == ["answer"]


def test_examples_are_sent_as_turns_after_the_system_prompt_and_never_saved() -> None:
    prompt = parse_prompt(
        "---\nid: t\nversion: 3\n---\nBe brief.\n\n## example\nuser: count x\n"
        'call: count_lines {"path": "x"}\nresult: x has 1 line.\ncall: answer {"text": "1"}\n',
        "t",
    )
    assert prompt.label == "t@3" and prompt.text == "Be brief."
    assert [m.role for m in prompt.examples] == ["user", "assistant", "tool", "assistant"]
    backend = FakeBackend([AssistantMessage(content="ok")])
    session = Session()
    loop = AgentLoop(backend, tools(), system_prompt=prompt.text, examples=prompt.examples)
    list(loop.run(session, "hello"))
    sent = [m.role for m in backend.requests[0].messages]
    assert sent == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert [m.role for m in session.messages] == ["system", "user", "assistant"]


def test_bundled_prompts_load_with_their_versions() -> None:
    for name in ("default", "small", "small-shots"):
        prompt = load_prompt(name)
        assert prompt.id == name and prompt.version and prompt.text
