"""Loop guards: notice a run that keeps doing the same thing and stop it with a reason.

A model that is stuck rarely repeats itself byte for byte: it writes ``{"path": "Notes.txt/"}``
after ``{"path":"notes.txt"}``, or swings between two calls. Three patterns are watched, each
counted within one run:

* the same call (arguments compared after normalising) giving the same observation again;
* the same error observation again, whatever call caused it;
* two calls in turn, A B A B ..., each giving the same observation as the last time.

A call whose observation changed is progress (reading a file again after editing it), so only
calls that learnt nothing new are counted. One step before a limit the observation carries a
note saying so, the model's one chance to change course; at the limit the run stops.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agent.events import ToolResultEvent
from agent.messages import ToolCall

# Who decided a call was not run again because it repeated an earlier one (see AgentLoop).
REPEAT_GUARD = "repeat guard"


@dataclass(slots=True)
class GuardLimits:
    """How many times each pattern may happen before the run stops (0: not watched)."""

    repeated_call: int = 3  # the same call with the same observation
    repeated_error: int = 3  # the same error observation, whatever the call
    alternation: int = 3  # A B A B A B: each of two calls made this many times in turn
    warn_first: bool = True  # one step before a limit, say so in the observation


@dataclass(slots=True)
class Stop:
    """Why the run must stop: the ErrorEvent's reason and a message for the person."""

    reason: str  # "repeated_call", "repeated_error" or "alternating_calls"
    message: str


@dataclass(slots=True)
class _Seen:
    key: str  # the call, normalised
    label: str  # the call, for people: "read_file on notes.txt"
    result: str  # a fingerprint of its observation


@dataclass
class ProgressGuard:
    """Watches one run's tool results; one per run (a loop serves many runs at once)."""

    limits: GuardLimits
    history: list[_Seen] = field(default_factory=list)
    last_result: dict[str, str] = field(default_factory=dict)  # call key -> fingerprint
    same_calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)

    def observe(
        self, call: ToolCall, result: ToolResultEvent
    ) -> tuple[ToolResultEvent, Stop | None]:
        """Record one call and its result; return the result (with a note when one more of
        the same would stop the run) and the reason to stop, if the run must stop now."""
        key = call_key(call)
        label = call_label(call)
        if result.decided_by == REPEAT_GUARD:
            # Not run again: it learnt what it learnt the last time.
            fingerprint = self.last_result.get(key, _fingerprint(result.content))
        else:
            fingerprint = _fingerprint(result.content)
        self.last_result[key] = fingerprint
        self.history.append(_Seen(key, label, fingerprint))
        self.same_calls[(key, fingerprint)] += 1
        checks: list[tuple[Stop | None, str]] = []
        if not result.ok and result.decided_by != REPEAT_GUARD:
            error = _normal_text(result.content)
            self.errors[error] += 1
            checks.append(self._repeated_error(self.errors[error], label, result.content))
        # Alternation before the plain repeat: A B A B A is also A three times, and saying
        # that the run swung between two calls tells the person more.
        checks.append(self._alternating())
        checks.append(self._repeated_call(self.same_calls[(key, fingerprint)], label))
        for stop, _ in checks:
            if stop is not None:
                return result, stop
        note = next((note for _, note in checks if note), "")
        if note and self.limits.warn_first:
            result = _with_note(result, note)
        return result, None

    def _repeated_call(self, count: int, label: str) -> tuple[Stop | None, str]:
        return _at_limit(
            count,
            self.limits.repeated_call,
            Stop("repeated_call", f"stopped: {label} kept giving the same result ({count} times)"),
            f"you have made this call {count} times with the same result; "
            "making it again will stop the run. Use what you have or try something else.",
        )

    def _repeated_error(self, count: int, label: str, content: str) -> tuple[Stop | None, str]:
        first = content.strip().splitlines()[0] if content.strip() else "(empty)"
        return _at_limit(
            count,
            self.limits.repeated_error,
            Stop(
                "repeated_error",
                f"stopped: {label} kept failing with the same error ({count} times): "
                f"{_shorten(first, 160)}",
            ),
            f"this error has now come {count} times; the same error again will stop "
            "the run. Try something different.",
        )

    def _alternating(self) -> tuple[Stop | None, str]:
        limit = self.limits.alternation
        length = _alternation_length(self.history)
        if limit < 2 or length < 4:
            return None, ""
        a, b = self.history[-1].label, self.history[-2].label
        if length >= 2 * limit - 1:
            return Stop(
                "alternating_calls",
                f"stopped: the run kept going back and forth between {a} and {b} "
                f"with the same results ({length} calls)",
            ), ""
        if length == 2 * limit - 2:
            return None, (
                f"you are going back and forth between {a} and {b} with the same results; "
                "doing it again will stop the run. Use what you have or try something else."
            )
        return None, ""


def _at_limit(count: int, limit: int, stop: Stop, warning: str) -> tuple[Stop | None, str]:
    """``stop`` once ``count`` reaches ``limit`` (0: no limit); ``warning`` one count before."""
    if not limit:
        return None, ""
    if count >= limit:
        return stop, ""
    if count == limit - 1 and count > 1:
        return None, warning
    return None, ""


def _alternation_length(history: list[_Seen]) -> int:
    """How many of the latest entries alternate strictly between two distinct entries."""
    if len(history) < 2:
        return len(history)
    first, second = _pair(history[-1]), _pair(history[-2])
    if first == second:
        return 1
    length = 2
    for seen in reversed(history[:-2]):
        expected = first if length % 2 == 0 else second
        if _pair(seen) != expected:
            break
        length += 1
    return length


def _pair(seen: _Seen) -> tuple[str, str]:
    return seen.key, seen.result


def call_key(call: ToolCall) -> str:
    """The call with its arguments normalised: key order, whitespace, letter case, trailing
    slashes and ``10.0`` against ``10`` do not make two calls different."""
    try:
        args: Any = call.function.parsed_arguments()
    except ValueError:
        args = call.function.arguments
    normal = json.dumps(_normal(args), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return f"{call.function.name.strip().lower()} {normal}"


def call_label(call: ToolCall) -> str:
    """The call as people read it: the tool and its first text argument."""
    name = call.function.name
    try:
        args: Any = call.function.parsed_arguments()
    except ValueError:
        return name
    if isinstance(args, dict):
        text = next((v for v in args.values() if isinstance(v, str) and v.strip()), None)
        if text is not None:
            return f"{name} on {_shorten(' '.join(text.split()), 60)}"
    return name


def _normal(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k).strip().lower(): _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = " ".join(value.split()).lower()
        return text.rstrip("/") if len(text) > 1 else text
    return value


def _normal_text(text: str) -> str:
    return " ".join(text.split()).lower()


def _fingerprint(content: str) -> str:
    return hashlib.sha256(_normal_text(content).encode("utf-8")).hexdigest()[:16]


def _with_note(result: ToolResultEvent, note: str) -> ToolResultEvent:
    return ToolResultEvent(
        result.call_id,
        result.name,
        f"{result.content}\n(Note: {note})",
        result.ok,
        result.seconds,
        decision=result.decision,
        decided_by=result.decided_by,
        provenance=result.provenance,
    )


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
