"""Training examples from BFCL's live categories, in the requests ``bench/bfcl.py`` sends.

BFCL data may feed training only from categories that are not reported; ``bench/bfcl.py``
reports ``simple_python``, ``multiple`` and ``irrelevance``, so these come from
``live_simple`` and ``live_multiple`` (extract them as ``bench/bfcl_relevance.py`` says). Each
case becomes one example in the OpenAI fine-tuning format that ``agent train --data`` reads: the
request of the agent mapping (the ``small`` prompt, the three functions the profile's tool
selection offers plus ``answer``) and, as the assistant's reply, the case's expected call with
the first of each argument's possible values (an argument whose first possible value is empty
is left out, as BFCL marks an optional one). A case whose expected function the selection does
not offer is skipped, since the model could not have called it::

    PYTHONPATH=. python bench/bfcl_live_examples.py --data /tmp/bfcl/bfcl_eval/data \\
        --multiple 250 --out /tmp/bfcl_live.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from agent.messages import AssistantMessage, ToolCall
from bench.bfcl import Case, request_shape
from bench.bfcl_relevance import load_live


def gold_call(answer: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    """The expected call of a single-call case: its name (as offered) and arguments."""
    if len(answer) != 1:
        return None
    [(name, possible)] = answer[0].items()
    arguments = {k: v[0] for k, v in possible.items() if v and v[0] != ""}
    return name.replace(".", "_"), arguments


def example(case: Case, shape: Any) -> dict[str, Any] | None:
    """One training example for ``case``, or None when it cannot be one."""
    called = gold_call(case.answer or [])
    if called is None:
        return None
    request = shape.request(case)
    offered = request.allowed_tools or [t.function.name for t in request.tools or []]
    if called[0] not in offered:
        return None
    reply = AssistantMessage(content=None, tool_calls=[ToolCall.make(*called)])
    messages = [m.model_dump(mode="json", exclude_none=True) for m in request.messages]
    messages.append(reply.model_dump(mode="json", exclude_none=True))
    tools = [t.model_dump(mode="json", exclude_none=True) for t in request.tools or []]
    return {"messages": messages, "tools": tools}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="bfcl_eval/data of the package")
    parser.add_argument("--multiple", type=int, default=250, help="live_multiple cases drawn")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    shape = request_shape("agent", "small", 128)
    simple = [c for c, _ in load_live(args.data, "live_simple")]
    multiple = [c for c, _ in load_live(args.data, "live_multiple")]
    random.Random(args.seed).shuffle(multiple)
    written = skipped = 0
    with args.out.open("w", encoding="utf-8") as fh:
        for case in [*simple, *multiple[: args.multiple]]:
            made = example(case, shape)
            if made is None:
                skipped += 1
                continue
            fh.write(json.dumps(made) + "\n")
            written += 1
    print(f"{written} examples written to {args.out}, {skipped} cases skipped")


if __name__ == "__main__":
    main()
