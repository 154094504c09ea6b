"""`agent traces fix`: a failed eval run is corrected (scripted turns or a hand edit), the new
run is graded good, linked to the original, and exported as training data.

The model is the scripted fake backend: what is tested is the replay, the grading and the
records, all through the real CLI, loop, `simple` skill, sandbox and the task's check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agent.trace import read_trace, read_traces

ROOT = Path(__file__).resolve().parents[2]

SUITE = """
name: fixme
tasks:
  - id: count-notes
    prompt: How many lines are in notes.txt?
    family: count
    files: {notes.txt: "a\\nb\\nc\\n"}
    check: {answer_regex: '\\b3\\b'}
"""


def _call(name: str, **arguments: object) -> dict[str, object]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


WRONG = [_call("count_lines", path="notes.txt"), _call("answer", text="It has 4 lines.")] * 3
RIGHT = [_call("count_lines", path="notes.txt"), _call("answer", text="notes.txt has 3 lines.")]


def _agent(tmp: Path, *args: str, editor: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CLAWLOOP_CONFIG": str(tmp / "config.toml"),
        "CLAWLOOP_DATA_DIR": str(tmp / "data"),
        "COLUMNS": "200",
    }
    if editor is not None:
        env.pop("VISUAL", None)
        env["EDITOR"] = editor
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        cwd=tmp,
    )


def _failed_eval_run(tmp: Path) -> str:
    """One eval run in the small profile that gives the wrong count; its run id."""
    script = tmp / "wrong.json"
    script.write_text(json.dumps(WRONG))
    (tmp / "config.toml").write_text(f'profile = "small"\n[backends.fake]\nscript = "{script}"\n')
    (tmp / "suite.yaml").write_text(SUITE)
    done = _agent(tmp, "eval", "suite.yaml", "-b", "fake", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["variants"][0]["passed"] == 0
    [trace] = read_traces(tmp / "data" / "traces")
    assert trace.grade == "bad" and trace.start["eval_task"]["files"] == {"notes.txt": "a\nb\nc\n"}
    return trace.run_id


def _export(tmp: Path) -> list[dict[str, object]]:
    out = tmp / "good.jsonl"
    done = _agent(tmp, "traces", "export", "--grade", "good", "--family", "count", "-o", str(out))
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_a_failed_eval_run_fixed_by_script_is_checked_and_exported(tmp_path: Path) -> None:
    original = _failed_eval_run(tmp_path)
    assert _export(tmp_path) == []

    still_wrong = tmp_path / "still-wrong.json"
    still_wrong.write_text(json.dumps(WRONG[:2]))
    refused = _agent(tmp_path, "traces", "fix", original, "--script", str(still_wrong))
    assert refused.returncode == 2
    assert "still fails" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    folder = tmp_path / "data" / "traces"
    assert read_trace(folder / f"{original}.jsonl").fixed_by is None

    right = tmp_path / "right.json"
    right.write_text(json.dumps(RIGHT))
    fixed = _agent(tmp_path, "traces", "fix", original[:6], "--script", str(right))
    assert fixed.returncode == 0, fixed.stderr
    assert "passes its task's check" in fixed.stdout

    new_id = read_trace(folder / f"{original}.jsonl").fixed_by
    assert new_id is not None
    new = read_trace(folder / f"{new_id}.jsonl")
    [grade] = new.of_type("grade")
    assert (grade["grade"], grade["by"], grade["note"]) == ("good", "fix", "")
    assert new.start["fixes"] == original and new.start["family"] == "count"
    assert new.start["profile"] == "small"  # replayed with the profile the model runs with
    [result] = new.of_type("tool_result")
    assert result["ok"] and "3" in result["content"]  # the real tool ran on the task's files

    [example] = _export(tmp_path)
    said = [m for m in example["messages"] if m["role"] == "assistant"]  # type: ignore[union-attr]
    assert (
        said[-1]["tool_calls"][0]["function"]["arguments"] == '{"text": "notes.txt has 3 lines."}'
    )
    listed = _agent(tmp_path, "traces", "list")
    assert f"fixed by {new_id}" in listed.stdout


# An editor: corrects the answer; given a tool name first, also renames the call to it.
EDITOR = """import json, sys
*rename, path = sys.argv[1:]
doc = json.load(open(path))
last = doc["messages"][-1]["tool_calls"][0]["function"]
last["arguments"] = json.dumps({"text": "notes.txt has 3 lines."})
if rename:
    last["name"] = rename[0]
json.dump(doc, open(path, "w"))
"""


def test_a_hand_edit_is_checked_then_stored_as_a_good_run(tmp_path: Path) -> None:
    original = _failed_eval_run(tmp_path)
    editor = tmp_path / "editor.py"
    editor.write_text(EDITOR)
    command = f"{sys.executable} {editor}"

    refused = _agent(tmp_path, "traces", "fix", original, "--edit", editor=f"{command} shout")
    assert refused.returncode == 2
    assert "'shout', a tool the run did not have" in refused.stderr
    assert _export(tmp_path) == []

    done = _agent(tmp_path, "traces", "fix", original, "--edit", editor=command)
    assert done.returncode == 0, done.stderr
    [example] = _export(tmp_path)
    messages = example["messages"]
    assert isinstance(messages, list)
    assert '"notes.txt has 3 lines."' in messages[-1]["tool_calls"][0]["function"]["arguments"]
    roles = [m["role"] for m in messages]
    assert roles[-3:] == ["assistant", "tool", "assistant"]  # the call's result kept its place
    folder = tmp_path / "data" / "traces"
    new = read_trace(folder / f"{read_trace(folder / f'{original}.jsonl').fixed_by}.jsonl")
    assert new.start["edited"] and new.grade == "good" and new.of_type("grade")[0]["by"] == "fix"

    neither = _agent(tmp_path, "traces", "fix", original)
    assert neither.returncode == 2 and "give one of --script" in neither.stderr


def test_an_edit_is_refused_for_each_thing_a_run_cannot_hold() -> None:
    from cli.trace_edit import edit_problem

    tools = [{"type": "function", "function": {"name": n}} for n in ("count_lines", "answer")]

    def call(name: str, arguments: str, call_id: str = "c1") -> dict[str, object]:
        function = {"name": name, "arguments": arguments}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": function}],
        }

    user = {"role": "user", "content": "How many lines are in notes.txt?"}
    result = {"role": "tool", "tool_call_id": "c1", "name": "count_lines", "content": "3 lines"}
    answer = call("answer", '{"text": "3"}', "c2")
    assert (
        edit_problem({"messages": [user, call("count_lines", "{}"), result, answer]}, tools) is None
    )
    cases = {
        "tool result without its call": [user, result, answer],
        "tool call without its result": [user, call("count_lines", "{}"), answer],
        "not valid JSON": [user, call("count_lines", "{oops"), result, answer],
        "must be a JSON object": [user, call("count_lines", "[1]"), result, answer],
        "the last message must be the assistant's answer": [
            user,
            call("count_lines", "{}"),
            result,
        ],
        "no user message": [answer],
    }
    for why, messages in cases.items():
        assert why in (edit_problem({"messages": messages}, tools) or ""), why
    assert "JSON object" in (edit_problem([user], tools) or "")


def test_a_failed_eval_run_is_fixed_by_search_over_the_tools_it_was_offered(
    tmp_path: Path,
) -> None:
    # The scripted model counted lines where the user asked for characters; with command
    # recipes on, the search finds the recipe that passes the task's check.
    script = tmp_path / "wrong.json"
    script.write_text(json.dumps(WRONG))
    (tmp_path / "config.toml").write_text(
        f'profile = "small"\n[small]\nrecipes = true\n[backends.fake]\nscript = "{script}"\n'
    )
    (tmp_path / "suite.yaml").write_text(
        SUITE.replace("How many lines are in notes.txt?", "How many characters are in notes.txt?")
        .replace("family: count", "family: count-chars")
        .replace("\\b3\\b", "\\b6\\b")
    )
    done = _agent(tmp_path, "eval", "suite.yaml", "-b", "fake", "--json")
    assert json.loads(done.stdout)["variants"][0]["passed"] == 0, done.stderr
    folder = tmp_path / "data" / "traces"
    [original] = [t.run_id for t in read_traces(folder)]

    fixed = _agent(tmp_path, "traces", "fix", original, "--search")
    assert fixed.returncode == 0, fixed.stderr
    assert "passes its task's check" in fixed.stdout
    new = read_trace(folder / f"{read_trace(folder / f'{original}.jsonl').fixed_by}.jsonl")
    assert new.grade == "good" and new.start["fixes"] == original
    [call] = new.of_type("tool_call")
    assert call["call"]["function"]["name"] == "count_characters"
    [result] = new.of_type("tool_result")
    assert result["ok"] and "6 characters" in result["content"]
    # Only the fix is kept: the search's own tries ran in a throwaway folder.
    assert len(read_traces(folder)) == 2

    # A check that no offered call can pass: one line saying what to do, nothing stored.
    (tmp_path / "suite.yaml").write_text(SUITE.replace("\\b3\\b", "\\b99\\b"))
    done = _agent(tmp_path, "eval", "suite.yaml", "-b", "fake", "--json")
    unfixable = next(t.run_id for t in read_traces(folder) if t.start.get("family") == "count")
    refused = _agent(tmp_path, "traces", "fix", unfixable, "--search")
    assert refused.returncode == 2
    assert "fix it with --script or --edit" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert len(read_traces(folder)) == 3


def test_every_failed_eval_run_is_searched_for_a_fix_at_once(tmp_path: Path) -> None:
    original = _failed_eval_run(tmp_path)  # fixable: count_lines says 3
    (tmp_path / "suite.yaml").write_text(
        SUITE.replace("\\b3\\b", "\\b99\\b").replace("count-notes", "impossible")
    )
    _agent(tmp_path, "eval", "suite.yaml", "-b", "fake", "--json")
    done = _agent(tmp_path, "traces", "fix", "--failed", "--search", "--family", "count")
    assert done.returncode == 0, done.stderr
    assert "1 of 2 failed eval runs fixed by search" in done.stdout
    folder = tmp_path / "data" / "traces"
    assert read_trace(folder / f"{original}.jsonl").fixed_by is not None
    # Fixed runs are not searched again.
    again = _agent(tmp_path, "traces", "fix", "--failed", "--search")
    assert "0 of 1 failed eval runs" in again.stdout
    wrong = _agent(tmp_path, "traces", "fix", "--failed", "--edit")
    assert wrong.returncode == 2 and "--failed fixes runs by search" in wrong.stderr
