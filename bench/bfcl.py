"""BFCL's simple_python, multiple and irrelevance categories on the bundled model, scored by
BFCL's AST checker, through clawloop's own chat template, tool rendering, grammar and parser.

Each case becomes one clawloop ``ChatRequest`` served by the llamacpp backend
(``backends/llamacpp/backend.py``) on the bundled SmolLM2-135M-Instruct GGUF, exactly as a run of
``agent`` would send it. The BFCL functions are converted to JSON Schema as BFCL converts them
for OpenAI models (``bench/bfcl_schema.py``) and offered as the request's tools; the reply is
parsed by clawloop's parser and scored by a port of BFCL's checker (``bench/bfcl_checker.py``).

How a BFCL case maps to a clawloop request (``--mapping``):

- ``clawloop`` (the default): the request the small-model profile sends for the bundled model.
  The system prompt is clawloop's ``small`` prompt (``--prompt``; ``small-shots`` adds worked
  examples that call tools BFCL does not offer); the tools are the BFCL functions plus
  clawloop's ``answer`` tool, the small profile's way of replying in text; ``tool_choice`` is
  "required", as the loop sets it when the answer tool is offered. A call to ``answer`` is a
  text reply: it is no function call in BFCL's terms (right for irrelevance, wrong elsewhere).
  The profile's tool selection is not applied: every BFCL function is offered.
- ``agent``: the ``clawloop`` request cut down by the small profile's tool selection, exactly
  as the agent loop applies it (``agent/tool_selection.py``, the defaults of ``[small]``): the
  BFCL functions whose words best match the question (two, and the best of each step of a
  request of several); none when no word matches (then
  only ``answer`` is offered); and since a question that matches a tool is looked into before
  it is answered (``look_first``), ``answer`` is held back by the grammar in that case. Then
  the profile's grounding check (``agent/grounding.py``, ``[small] grounded_calls``): a call
  whose short values appear nowhere in the question is not run, and only ``answer`` is offered
  next, so the reply is text. The report also scores the same replies with the check off
  (``unchecked``).
- ``bfcl``: BFCL's own request for a function-calling model: no system prompt, the BFCL
  functions as the tools, ``tool_choice`` left to the model ("auto"), so the grammar starts
  only if the model writes ``<tool_call>``.

Four configurations (``--configs``): with and without the grammar (``grammar``: the backend's
tool-call grammar; ``free``: the same prompt, decoded with no grammar and parsed by clawloop's
parser), each with and without the shipped LoRA adapter (``backends/adapters/``). Decoding is
greedy, at most ``--max-tokens`` tokens.

Every finished case is appended to ``--results`` (JSON lines) and skipped when the command is
run again with the same file, so a long run can be stopped (or given ``--time-limit``) and
resumed. Run by hand:

    PYTHONPATH=. python bench/bfcl.py --limit 20 --results /tmp/bfcl.jsonl --json /tmp/bfcl.json

The BFCL data is in ``bench/bfcl_data/`` (see its README): read at run time, nothing is
downloaded. It is for measuring only, never for training.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from agent.backend import Completion
from agent.messages import ChatRequest, Message, SystemMessage, ToolSpec, UserMessage
from agent.tool_selection import LexicalToolSelector
from backends.base import Decoder, DecodeResult, LocalBackend
from bench.bfcl_checker import Result, check_ast, check_irrelevance
from bench.bfcl_schema import to_tool_specs

DATA = Path(__file__).parent / "bfcl_data"
CATEGORIES = ("simple_python", "multiple", "irrelevance")
CONFIGS = ("base+grammar", "base+free", "adapter+grammar", "adapter+free")
ANSWER_TOOL = "answer"
# Published BFCL figures of sub-1B models, for context: (overall single-turn, irrelevance).
PUBLISHED = {"Qwen3-0.6B": (71.8, 80.8), "Hammer2.1-0.5B": (66.0, 80.8)}


@dataclass(slots=True)
class Case:
    """One BFCL case: its question, functions and (outside irrelevance) possible answers."""

    id: str
    category: str
    question: list[dict[str, str]]
    functions: list[dict[str, Any]]
    answer: list[dict[str, Any]] | None


@dataclass(slots=True)
class Outcome:
    """What one configuration did on one case."""

    key: str
    id: str
    category: str
    config: str
    valid: bool
    calls: list[tuple[str, str]]
    text: str
    raw: str
    error: str
    seconds: float
    # mapping agent: the values the loop's grounding check found nowhere in the question (the
    # loop then runs no call and offers only the answer), and the verdict without that check
    guessed: list[str] = field(default_factory=list)
    unchecked: bool | None = None


def load_cases(category: str) -> list[Case]:
    """The category's cases from the vendored BFCL files."""
    questions = _jsonl(DATA / f"BFCL_v4_{category}.json.gz")
    answers: dict[str, Any] = {}
    if category != "irrelevance":
        answers = {
            a["id"]: a["ground_truth"] for a in _jsonl(DATA / f"BFCL_v4_{category}_answer.json.gz")
        }
    return [
        Case(q["id"], category, q["question"][0], q["function"], answers.get(q["id"]))
        for q in questions
    ]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def sample(cases: list[Case], limit: int | None, seed: int) -> list[Case]:
    """``limit`` cases drawn with ``seed`` (all when unset), in the file's order.

    The draw is the first ``limit`` of one seeded shuffle, so a larger ``--limit`` keeps every
    case of a smaller one and a results file from the smaller run is reused.
    """
    if limit is None or limit >= len(cases):
        return cases
    order = list(range(len(cases)))
    random.Random(seed).shuffle(order)
    chosen = set(order[:limit])
    return [c for i, c in enumerate(cases) if i in chosen]


def interleave(groups: list[list[Case]]) -> list[Case]:
    """Round robin over the categories, so a run stopped early has a share of each."""
    out: list[Case] = []
    for i in range(max((len(g) for g in groups), default=0)):
        out += [g[i] for g in groups if i < len(g)]
    return out


class FreeDecoder:
    """A decoder with no grammar: the tools stay in the prompt, decoding is unconstrained."""

    def __init__(self, inner: Decoder) -> None:
        self.inner = inner

    def decode(
        self, prompt: str, request: ChatRequest, stop: list[str], tools: list[ToolSpec] | None
    ) -> Iterator[str | DecodeResult]:
        return self.inner.decode(prompt, request, stop, None)


def make_backends(
    configs: list[str], threads: int | None, adapter_path: Path | None = None
) -> dict[str, LocalBackend]:
    """One backend per configuration; the two of one model share its loaded weights. The
    ``adapter`` configurations use ``adapter_path`` (default: the shipped adapter)."""
    from backends.gguf.default_model import SHIPPED_ADAPTER
    from backends.llamacpp.backend import LlamaCppOptions, make_llamacpp_backend

    backends: dict[str, LocalBackend] = {}
    for name in configs:
        model, decoding = name.split("+")
        adapter = str(adapter_path or SHIPPED_ADAPTER) if model == "adapter" else "none"
        backend = make_llamacpp_backend(
            options=LlamaCppOptions(threads=threads, disk_cache=False), adapter=adapter
        )
        if decoding == "free":
            backend = LocalBackend(backend.name, backend.template, FreeDecoder(backend.decoder))
        backends[name] = backend
    return backends


def answer_tool_spec() -> ToolSpec:
    """clawloop's own ``answer`` tool, as the ``simple`` skill defines it."""
    from agent.tools import tool_spec
    from skills.context import Places, SkillContext
    from skills.simple import ANSWER_TOOL as NAME
    from skills.simple import make_simple_tools

    with (
        tempfile.TemporaryDirectory(prefix="clawloop-bfcl-") as folder,
        tempfile.TemporaryDirectory(prefix="clawloop-bfcl-data-") as data,
    ):
        # clawloop refuses a data folder inside the workspace, so the two are apart.
        context = SkillContext.create(Path(folder), places=Places(data_dir=Path(data)), environ={})
        tool = next(t for t in make_simple_tools(context) if t.name == NAME)
        return tool_spec(tool)


@dataclass(slots=True)
class RequestShape:
    """How BFCL cases become requests (see the module docstring)."""

    mapping: str
    system_prompt: str | None
    answer_tool: ToolSpec | None
    max_tokens: int

    def request(self, case: Case) -> ChatRequest:
        messages: list[Message] = []
        if self.system_prompt:
            messages.append(SystemMessage(content=self.system_prompt))
        messages += [UserMessage(content=m["content"]) for m in case.question]
        tools = to_tool_specs(case.functions)
        if self.answer_tool is not None:
            tools.append(self.answer_tool)
        allowed: list[str] | None = None
        if self.mapping == "agent":
            tools, allowed = _profile_selector().choose(messages, tools)
        return ChatRequest(
            messages=messages,
            tools=tools,
            allowed_tools=allowed,
            tool_choice=None if self.mapping == "bfcl" else "required",
            temperature=0.0,
            max_tokens=self.max_tokens,
        )


def _profile_selector() -> LexicalToolSelector:
    """The small profile's tool selection with its default settings, as the loop builds it."""
    from cli.config import SmallModelSettings

    small = SmallModelSettings()
    return LexicalToolSelector(
        small.select_tools,
        always=[ANSWER_TOOL],
        look_first=small.look_first,
        steps=small.step_tools,
    )


def request_shape(mapping: str, prompt: str, max_tokens: int) -> RequestShape:
    """The request shape of ``mapping`` (``clawloop`` or ``bfcl``)."""
    if mapping == "bfcl":
        return RequestShape(mapping, None, None, max_tokens)
    from agent.prompts import load_prompt

    loaded = load_prompt(prompt)
    if loaded.examples:
        raise SystemExit(f"--prompt {prompt}: prompts with examples are not supported here")
    return RequestShape(mapping, loaded.text, answer_tool_spec(), max_tokens)


def run_case(backend: LocalBackend, shape: RequestShape, case: Case, config: str) -> Outcome:
    """Generate one reply and score it with BFCL's checker."""
    began = time.monotonic()
    completion: Completion | None = None
    for event in backend.generate(shape.request(case)):
        if isinstance(event, Completion):
            completion = event
    seconds = time.monotonic() - began
    if completion is None:
        raise RuntimeError("the backend ended without a completion")
    message = completion.message
    calls = [
        (c.function.name, c.function.arguments)
        for c in message.tool_calls or []
        if not (shape.answer_tool is not None and c.function.name == ANSWER_TOOL)
    ]
    unchecked: bool | None = None
    guessed: list[str] = []
    if shape.mapping == "agent":
        unchecked = bool(score(case, calls)["valid"])
        guessed = made_up_values(shape.request(case), calls)
    result = score(case, [] if guessed else calls)
    return Outcome(
        key="",
        id=case.id,
        category=case.category,
        config=config,
        valid=bool(result["valid"]),
        calls=calls,
        text=message.content or "",
        raw=completion.raw_text or "",
        error=str(result.get("error_type", "")) if not result["valid"] else "",
        seconds=round(seconds, 3),
        guessed=guessed,
        unchecked=unchecked,
    )


def rechecked(outcome: Outcome, shape: RequestShape, case: Case) -> Outcome:
    """A stored reply scored again with the grounding check as it is now (``--recheck``): the
    check is a function of the reply and its request, so no model runs."""
    if shape.mapping != "agent":
        return outcome
    guessed = made_up_values(shape.request(case), outcome.calls)
    result = score(case, [] if guessed else outcome.calls)
    error = "" if result["valid"] else str(result.get("error_type", ""))
    return replace(outcome, valid=bool(result["valid"]), error=error, guessed=guessed)


def made_up_values(request: ChatRequest, calls: list[tuple[str, str]]) -> list[str]:
    """What the small profile's grounding check (``[small] grounded_calls``) finds made up in
    ``calls``: when it finds anything, the loop runs none of them and offers only ``answer``,
    so the reply is text (no call, in BFCL's terms)."""
    from agent.grounding import Grounds, made_up

    grounds = Grounds.of(request.messages)
    schemas = {t.function.name: t.function.parameters for t in request.tools or []}
    found: list[str] = []
    for name, arguments in calls:
        try:
            args = json.loads(arguments)
        except ValueError:
            continue  # the loop's validation refuses it, with or without the check
        if isinstance(args, dict) and name in schemas:
            found += made_up(args, schemas[name], grounds)
    return found


def score(case: Case, calls: list[tuple[str, str]]) -> Result:
    """BFCL's verdict on the calls a model made for ``case``."""
    if case.category.endswith("irrelevance"):  # live_irrelevance too
        return check_irrelevance(calls)
    if case.answer is None:
        raise ValueError(f"{case.id} has no possible answers in bench/bfcl_data")
    return check_ast(case.functions, calls, case.answer, case.category)


def main() -> None:
    args = _parser().parse_args()
    categories = _names(args.categories, CATEGORIES, "--categories")
    configs = _names(args.configs, CONFIGS, "--configs")
    cases = interleave([sample(load_cases(c), args.limit, args.seed) for c in categories])
    shape = request_shape(args.mapping, args.prompt, args.max_tokens)
    mapping = "agent-grounded" if args.mapping == "agent" else args.mapping
    run_tag = f"{mapping}:{args.prompt if args.mapping != 'bfcl' else '-'}:{args.max_tokens}"
    done = _load_results(args.results, run_tag)
    backends = make_backends(configs, args.threads, args.adapter)
    print(f"{len(cases)} cases x {len(configs)} configurations, mapping {args.mapping}", flush=True)
    began = time.monotonic()
    outcomes: list[Outcome] = []
    stopped = False
    for n, case in enumerate(cases, 1):
        for config in configs:
            key = f"{run_tag}|{config}|{case.id}"
            if key in done:
                stored = done[key]
                outcomes.append(rechecked(stored, shape, case) if args.recheck else stored)
                continue
            if args.time_limit and time.monotonic() - began > args.time_limit:
                stopped = True
                break
            outcome = run_case(backends[config], shape, case, config)
            outcome.key = key
            outcomes.append(outcome)
            _append(args.results, outcome)
            print(
                f"[{n}/{len(cases)}] {case.id:20} {config:16} "
                f"{'ok  ' if outcome.valid else 'FAIL'} {outcome.seconds:5.1f}s "
                f"{outcome.error}",
                flush=True,
            )
        if stopped:
            print(f"--time-limit reached after {n - 1} cases; run again to resume", flush=True)
            break
    if args.mapping == "agent":  # the same replies, scored as if the check were off
        outcomes += [
            replace(o, config=f"{o.config} unchecked", valid=o.unchecked)
            for o in outcomes
            if o.unchecked is not None
        ]
        configs = [*configs, *(f"{c} unchecked" for c in configs)]
    summary = summarize(outcomes, configs, categories)
    print_report(summary, configs, args)
    if args.json:
        report = {
            "settings": {
                **vars(args),
                "results": str(args.results),
                "json": str(args.json),
                "adapter": str(args.adapter) if args.adapter else "shipped",
            },
            "summary": summary,
            "published": PUBLISHED,
            "cases": [asdict(o) for o in outcomes],
        }
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")


def summarize(
    outcomes: list[Outcome], configs: list[str], categories: list[str]
) -> dict[str, dict[str, dict[str, float]]]:
    """Per configuration and category (and ``ast``: simple_python and multiple pooled):
    passed, total, rate and its 95% Wilson interval, and seconds per case."""
    from cli.evals.stats import wilson

    groups = [*categories]
    if {"simple_python", "multiple"} <= set(categories):
        groups.append("ast")
    table: dict[str, dict[str, dict[str, float]]] = {}
    for config in configs:
        table[config] = {}
        for group in groups:
            members = ("simple_python", "multiple") if group == "ast" else (group,)
            picked = [o for o in outcomes if o.config == config and o.category in members]
            passed, total = sum(o.valid for o in picked), len(picked)
            low, high = wilson(passed, total)
            table[config][group] = {
                "passed": passed,
                "total": total,
                "rate": passed / total if total else 0.0,
                "low": low,
                "high": high,
                "seconds_per_case": sum(o.seconds for o in picked) / total if total else 0.0,
            }
    return table


def print_report(
    summary: dict[str, dict[str, dict[str, float]]], configs: list[str], args: Any
) -> None:
    """The accuracy table, then the published figures for context."""
    print(f"\nBFCL AST accuracy, mapping {args.mapping}, greedy, 95% Wilson interval")
    for config in configs:
        print(f"\n{config}")
        for group, row in summary[config].items():
            label = "simple_python+multiple" if group == "ast" else group
            print(
                f"  {label:24} {row['rate'] * 100:5.1f}%  [{row['low'] * 100:5.1f}, "
                f"{row['high'] * 100:5.1f}]  {int(row['passed'])}/{int(row['total'])}  "
                f"({row['seconds_per_case']:.1f} s/case)"
            )
    print("\npublished (BFCL leaderboard, all single-turn categories, not this sample):")
    for model, (single, irrelevance) in PUBLISHED.items():
        print(f"  {model:16} single-turn {single:.1f}%  irrelevance {irrelevance:.1f}%")


def _names(value: str, known: tuple[str, ...], option: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise SystemExit(f"{option}: choose from {', '.join(known)} (got {value!r})")
    return names


def _load_results(path: Path | None, run_tag: str) -> dict[str, Outcome]:
    """Cases already run with this request shape, from an earlier run's results file."""
    if path is None or not path.is_file():
        return {}
    done: dict[str, Outcome] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        data = json.loads(line)
        if data["key"].startswith(run_tag + "|"):
            data["calls"] = [tuple(c) for c in data["calls"]]
            done[data["key"]] = Outcome(**data)
    return done


def _append(path: Path | None, outcome: Outcome) -> None:
    if path is not None:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(outcome)) + "\n")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--categories", default=",".join(CATEGORIES))
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--limit", type=int, default=None, help="cases per category (sampled)")
    parser.add_argument("--seed", type=int, default=0, help="the sampling seed")
    # One thread by default: on a shared, busy machine two llama.cpp threads wait on each other
    # at every step, and prefill ran four times slower with two than with one.
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp CPU threads")
    parser.add_argument("--mapping", choices=("clawloop", "agent", "bfcl"), default="clawloop")
    parser.add_argument("--prompt", default="small", help="clawloop prompt id (mapping clawloop)")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--results", type=Path, default=None, help="JSON lines, for resuming")
    parser.add_argument("--time-limit", type=float, default=None, help="seconds, then stop")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    parser.add_argument(
        "--recheck",
        action="store_true",
        help="score the stored replies of --results again with the grounding check as it is now",
    )
    parser.add_argument(
        "--adapter", type=Path, default=None, help="the adapter configs' LoRA (default: shipped)"
    )
    return parser


if __name__ == "__main__":
    main()
