"""The library of worked examples (agent/shots.py), made from the curriculum's gold runs.

Each family's generated tasks are solved by their gold calls through the real loop, skills and
sandbox (:mod:`cli.evals.generators.gold`), with ``run_command`` offered so that every family
can be solved; a run that passes its check becomes one library line: the user's message, the
calls and their real results, and the answer. Results are cut to a few lines, since an example
is there to show the call, not the file. No held-out family is generated, and no task with the
prompt of a held-out suite's task, so the library never shows the model a task it is measured on.

    python -m cli.evals.generators.shots --per-family 3 --out agent/prompts/shots.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from agent.messages import AssistantMessage, Message, ToolMessage, UserMessage
from cli.config import Settings, load_settings
from cli.evals.generators.curriculum import generate
from cli.evals.generators.families import FAMILIES
from cli.evals.generators.gold import run_gold
from cli.evals.suite import Task, load_suite

RESULT_LINES = 6
RESULT_CHARS = 300


def _cut(text: str) -> str:
    lines = text.splitlines()
    kept = "\n".join(lines[:RESULT_LINES])
    if len(kept) > RESULT_CHARS:
        kept = kept[:RESULT_CHARS].rstrip()
    return kept if kept == text else f"{kept}\n[...]"


def _solved(messages: list[Message], answer: AssistantMessage) -> list[Message]:
    """The run's own turns (from its user message on), results cut, then the answer."""
    start = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    turns: list[Message] = []
    for m in messages[start:]:
        if isinstance(m, ToolMessage) and isinstance(m.content, str):
            m = ToolMessage(tool_call_id=m.tool_call_id, name=m.name, content=_cut(m.content))
        turns.append(m)
    return [*turns, answer]


def library_lines(
    settings: Settings,
    per_family: int,
    seed: int,
    held_out: Iterable[Task] = (),
    leave_out: Iterable[str] = (),
) -> Iterator[str]:
    """One JSONL line per family draw whose gold run passes (``leave_out``: families not drawn,
    to measure on them as if they were held out)."""
    left = set(leave_out)
    families = [f for f in FAMILIES if f not in left]
    made = generate(per_family * len(families), seed=seed, families=families, held_out=held_out)
    settings = settings.model_copy(
        update={"small": settings.small.model_copy(update={"command_tool": True, "shots": 0})}
    )
    for (_, gold), run in zip(made.items, run_gold(made, settings), strict=True):
        if not run.result.passed or not run.steps:
            continue
        request, answer = run.steps[-1]
        record: dict[str, Any] = {
            "family": gold.family,
            "prompt": gold.prompt,
            "messages": [m.to_record() for m in _solved(list(request.messages), answer)],
        }
        yield json.dumps(record, ensure_ascii=False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-family", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--held-out", action="append", type=Path, default=[], help="a suite to keep out"
    )
    parser.add_argument("--leave-out", action="append", default=[], help="a family not drawn")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    held = [t for path in args.held_out for t in load_suite(path).tasks]
    lines = list(library_lines(load_settings(), args.per_family, args.seed, held, args.leave_out))
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} worked examples written to {args.out}")


if __name__ == "__main__":
    main()
