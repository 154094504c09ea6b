"""How well can clawloop tell that no offered function fits? Measured on BFCL's live categories.

BFCL's ``irrelevance`` category asks for no call when no function fits; ``simple_python`` asks
for the right call. ``bench/bfcl.py`` reports both; this script measures the one decision
between them, whether to call at all, on categories that script does not report
(``live_irrelevance``, ``live_simple``, ``live_multiple``), so that anything tuned here is not
tuned on a reported figure. Two signals:

- ``selection``: the small profile's lexical tool selection (``agent/tool_selection.py``). A
  case counts as right when, for ``live_irrelevance``, no function is offered (only the
  ``answer`` tool, so the reply is text), and otherwise when every expected function is
  offered (a ceiling: the model still has to call it well). ``--rarity T`` adds a stricter
  rule: a function is offered only when the question's words it matches weigh at least ``T``,
  each word weighted by how rare it is in the bundled model's vocabulary (a word that is one
  token with a low id is common; a word split into several tokens is rare).
- ``model``: the model's own preference at the grammar's name position
  (``<tool_call>\\n{"name": "``), teacher-forced: the log-probability of ``answer`` minus that
  of the likeliest function, for ``--cases`` seeded cases of ``live_irrelevance`` and
  ``live_simple``. Printed: its AUC (how often an irrelevant case scores above a relevant
  one), and what a gate "answer when the margin is above M, on top of the selection" would do.
- ``grounding``: the model's own replies (shipped adapter, grammar, ``bench/bfcl.py``'s agent
  mapping) to ``--cases`` seeded cases of ``live_irrelevance`` and ``live_simple``, scored
  with and without the small profile's check for made-up values (``agent/grounding.py``): a
  call whose short values appear nowhere in the question is not run, so the reply is text.

The live files are not vendored (they are not needed for the reported figures). Extract them
from the same package version as ``bench/bfcl_data``::

    pip download bfcl-eval==2026.3.23 --no-deps -d /tmp/bfcl && cd /tmp/bfcl && unzip -q *.whl
    PYTHONPATH=. python bench/bfcl_relevance.py --data /tmp/bfcl/bfcl_eval/data selection
    PYTHONPATH=. python bench/bfcl_relevance.py --data /tmp/bfcl/bfcl_eval/data model --cases 70
    PYTHONPATH=. python bench/bfcl_relevance.py --data /tmp/bfcl/bfcl_eval/data grounding
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent.messages import Message, ToolSpec, UserMessage
from agent.tool_selection import LexicalToolSelector, _document, _same, words
from bench.bfcl import (
    ANSWER_TOOL,
    Case,
    Outcome,
    _profile_selector,
    answer_tool_spec,
    request_shape,
)
from bench.bfcl_schema import to_tool_specs

LIVE = ("live_irrelevance", "live_simple", "live_multiple")
NAME_PREFIX = '<tool_call>\n{"name": "'  # what the tool-call grammar forces before a name
_VOCAB = 49152


def load_live(data: Path, category: str) -> list[tuple[Case, set[str] | None]]:
    """The category's cases with the names of the functions a right answer calls (None for
    ``live_irrelevance``)."""
    answers: dict[str, Any] = {}
    truth = data / "possible_answer" / f"BFCL_v4_{category}.json"
    if truth.exists():
        with truth.open(encoding="utf-8") as fh:
            answers = {a["id"]: a["ground_truth"] for a in map(json.loads, fh)}
    out: list[tuple[Case, set[str] | None]] = []
    with (data / f"BFCL_v4_{category}.json").open(encoding="utf-8") as fh:
        for q in map(json.loads, fh):
            expected = answers.get(q["id"])
            case = Case(q["id"], category, q["question"][0], q["function"], expected)
            names = {next(iter(g)).replace(".", "_") for g in expected} if expected else None
            out.append((case, names))
    return out


def last_user(case: Case) -> list[Message]:
    users = [m for m in case.question if m["role"] == "user"]
    return [UserMessage(content=users[-1]["content"])] if users else []


def offered(selector: LexicalToolSelector, case: Case, answer: ToolSpec) -> set[str]:
    """The functions the model may call for ``case`` after the selection."""
    shown, allowed = selector.choose(last_user(case), [*to_tool_specs(case.functions), answer])
    names = {s.function.name for s in shown if allowed is None or s.function.name in allowed}
    return names - {ANSWER_TOOL}


def rarity_gate(threshold: float) -> Callable[[Case, set[str]], set[str]]:
    """Offer nothing unless some offered function matches words weighing ``threshold``."""
    from llama_cpp import Llama

    from backends.gguf.default_model import default_model_path

    vocab = Llama(model_path=str(default_model_path()), vocab_only=True, verbose=False)

    @functools.cache
    def rarity(word: str) -> float:
        ids = vocab.tokenize((" " + word).encode(), add_bos=False, special=False)
        if len(ids) == 1:
            return math.log2(2 + ids[0] / 500)
        return math.log2(2 + _VOCAB / 500) + len(ids) - 1

    def gate(case: Case, names: set[str]) -> set[str]:
        messages = last_user(case)
        terms = set(words(str(messages[0].content))) if messages else set()
        for spec in to_tool_specs(case.functions):
            if spec.function.name in names:
                doc = set(words(_document(spec)))
                if sum(rarity(t) for t in terms if any(_same(t, w) for w in doc)) >= threshold:
                    return names
        return set()

    return gate


def selection(data: Path, thresholds: Sequence[float]) -> None:
    answer = answer_tool_spec()
    selector = _profile_selector()
    rules: list[tuple[str, Callable[[Case, set[str]], set[str]] | None]] = [("current", None)]
    rules += [(f"rarity >= {t:g}", rarity_gate(t)) for t in thresholds]
    print("| rule | " + " | ".join(LIVE) + " |\n|---|---|---|---|")
    cases = {c: load_live(data, c) for c in LIVE}
    for label, gate in rules:
        cells = []
        for category in LIVE:
            right = 0
            for case, expected in cases[category]:
                names = offered(selector, case, answer)
                names = gate(case, names) if gate and names else names
                right += not names if expected is None else expected <= names
            total = len(cases[category])
            cells.append(f"{right}/{total}, {right / total:.1%}")
        print(f"| {label} | " + " | ".join(cells) + " |")


def name_margins(data: Path, count: int, adapter: bool) -> list[tuple[str, float, bool]]:
    """(category, log P(answer) - max log P(function), offered by the selection) per case."""
    from llama_cpp import Llama

    from backends.gguf.default_model import SHIPPED_ADAPTER, default_model_path
    from backends.llamacpp.backend import LlamaCppOptions, make_llamacpp_backend

    template = make_llamacpp_backend(options=LlamaCppOptions(disk_cache=False)).template
    llm = Llama(
        model_path=str(default_model_path()),
        n_ctx=4096,
        logits_all=True,
        verbose=False,
        lora_path=str(SHIPPED_ADAPTER) if adapter else None,
    )
    shape = request_shape("clawloop", "small", 64)
    selector, answer = _profile_selector(), answer_tool_spec()
    rows: list[tuple[str, float, bool]] = []
    for category in LIVE[:2]:
        cases = load_live(data, category)
        random.Random(0).shuffle(cases)
        for case, _ in cases[:count]:
            request = shape.request(case)
            prompt = template.render(
                request.messages, tools=request.tools, add_generation_prompt=True
            )
            tokens = llm.tokenize((prompt + NAME_PREFIX).encode(), add_bos=False, special=True)
            if len(tokens) > llm.n_ctx() - 64:
                continue
            llm.reset()
            llm.eval(tokens)
            names = [t.function.name for t in request.tools or []]
            scores = {n: _logprob(llm, len(tokens), n) for n in names}
            margin = scores.pop(ANSWER_TOOL) - max(scores.values())
            rows.append((category, margin, bool(offered(selector, case, answer))))
    return rows


def _logprob(llm: Any, start: int, name: str) -> float:
    """log P(``name"``) after the first ``start`` tokens, reusing their cache."""
    ids = llm.tokenize((name + '"').encode(), add_bos=False, special=False)
    llm.n_tokens = start
    llm.eval(ids)
    total = 0.0
    for i, token in enumerate(ids):
        logits = llm.scores[start - 1 + i]
        top = float(max(logits))
        total += float(logits[token]) - top - math.log(sum(math.exp(x - top) for x in logits))
    return total


def model(data: Path, count: int, adapter: bool) -> None:
    rows = name_margins(data, count, adapter)
    irr = [r for r in rows if r[0] == "live_irrelevance"]
    rel = [r for r in rows if r[0] == "live_simple"]
    pairs = [(a[1] > b[1]) + 0.5 * (a[1] == b[1]) for a in irr for b in rel]
    print(f"{len(irr)} live_irrelevance, {len(rel)} live_simple, adapter {adapter}")
    print(f"AUC of the answer-minus-function margin: {sum(pairs) / len(pairs):.3f}")
    print("| answer when not offered or margin > M | irrelevance answered | simple kept a call |")
    print("|---|---|---|")
    for m in (math.inf, 0.0, -1.0, -2.0, -3.0, -4.0):
        answered = sum(not o or g > m for _, g, o in irr)
        kept = sum(o and g <= m for _, g, o in rel)
        print(f"| M = {m:g} | {answered}/{len(irr)} | {kept}/{len(rel)} |")


def grounding(data: Path, count: int) -> list[Outcome]:
    """The model's own replies (shipped adapter, grammar, the agent mapping) to ``count`` seeded
    cases of ``live_irrelevance`` and ``live_simple``, scored with and without the small
    profile's check for made-up values (``agent/grounding.py``)."""
    from bench.bfcl import make_backends, run_case

    backend = make_backends(["adapter+grammar"], 1)["adapter+grammar"]
    shape = request_shape("agent", "small", 128)
    outcomes: list[Outcome] = []
    for category in LIVE[:2]:
        cases = load_live(data, category)
        random.Random(1).shuffle(cases)
        outcomes += [run_case(backend, shape, case, "adapter+grammar") for case, _ in cases[:count]]
    print("| check | live_irrelevance (text reply) | live_simple (right call) |\n|---|---|---|")
    for label, right in (("off", lambda o: o.unchecked), ("on", lambda o: o.valid)):
        cells = []
        for category in LIVE[:2]:
            picked = [o for o in outcomes if o.category == category]
            cells.append(f"{sum(bool(right(o)) for o in picked)}/{len(picked)}")
        print(f"| {label} | " + " | ".join(cells) + " |")
    lost = [o.id for o in outcomes if o.unchecked and not o.valid]
    print(f"right calls the check refused: {len(lost)} {lost}")
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="bfcl_eval/data of the package")
    sub = parser.add_subparsers(dest="what", required=True)
    sel = sub.add_parser("selection")
    sel.add_argument("--rarity", type=float, action="append", default=[])
    mod = sub.add_parser("model")
    mod.add_argument("--cases", type=int, default=70, help="per category")
    mod.add_argument("--base", action="store_true", help="the base model, not the adapter")
    ground = sub.add_parser("grounding")
    ground.add_argument("--cases", type=int, default=100, help="per category")
    args = parser.parse_args()
    if args.what == "selection":
        selection(args.data, args.rarity)
    elif args.what == "grounding":
        grounding(args.data, args.cases)
    else:
        model(args.data, args.cases, not args.base)


if __name__ == "__main__":
    main()
