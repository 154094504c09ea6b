"""Prometheus text for ``GET /metrics``, with vLLM's metric names so its dashboards work.

Gauges and token counters come from the engine core's stats snapshot; request latencies
(time to first token, inter-token latency, end-to-end) are observed by the HTTP front end.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field

from backends.engine.core.engine_core import EngineStats

TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
E2E_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
)


@dataclass(slots=True)
class Histogram:
    """Cumulative-bucket histogram in Prometheus's shape."""

    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out, running = [], 0
        for bound, n in zip((*self.buckets, float("inf")), self.counts, strict=True):
            running += n
            le = "+Inf" if bound == float("inf") else repr(bound)
            out.append(f'{name}_bucket{{{labels},le="{le}"}} {running}')
        out.append(f"{name}_sum{{{labels}}} {self.total}")
        out.append(f"{name}_count{{{labels}}} {self.count}")
        return out


class ServerMetrics:
    """Latency histograms and request counters observed by the server; thread-safe."""

    def __init__(self, model_name: str) -> None:
        self.labels = f'model_name="{_escape(model_name)}"'
        self._lock = threading.Lock()
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)
        self.finished: dict[str, int] = {}

    def first_token(self, seconds: float) -> None:
        with self._lock:
            self.ttft.observe(seconds)

    def next_token(self, seconds: float) -> None:
        with self._lock:
            self.itl.observe(seconds)

    def request_done(self, reason: str, seconds: float) -> None:
        with self._lock:
            self.finished[reason] = self.finished.get(reason, 0) + 1
            self.e2e.observe(seconds)

    def render(self, stats: EngineStats) -> str:
        """The whole exposition text."""
        lab = self.labels
        rows: list[tuple[str, str, str, float]] = [
            (
                "vllm:num_requests_running",
                "gauge",
                "Requests in the running batch.",
                stats.num_running,
            ),
            (
                "vllm:num_requests_waiting",
                "gauge",
                "Requests waiting to be scheduled.",
                stats.num_waiting,
            ),
            (
                "vllm:kv_cache_usage_perc",
                "gauge",
                "KV-cache usage: 1 means 100 percent.",
                stats.kv_cache_usage,
            ),
            (
                "vllm:gpu_cache_usage_perc",
                "gauge",
                "KV-cache usage (older name).",
                stats.kv_cache_usage,
            ),
            (
                "vllm:num_preemptions_total",
                "counter",
                "Preemptions since start.",
                stats.num_preemptions,
            ),
            ("vllm:prompt_tokens_total", "counter", "Prompt tokens admitted.", stats.prompt_tokens),
            (
                "vllm:generation_tokens_total",
                "counter",
                "Tokens generated.",
                stats.generation_tokens,
            ),
            (
                "vllm:prefix_cache_queries_total",
                "counter",
                "Prompt tokens looked up in the cache.",
                stats.prefix_cache_queries,
            ),
            (
                "vllm:prefix_cache_hits_total",
                "counter",
                "Prompt tokens found in the cache.",
                stats.prefix_cache_hits,
            ),
            (
                "vllm:spec_decode_num_drafts_total",
                "counter",
                "Verification steps of sequences that carried drafted tokens.",
                stats.speculation.num_drafts,
            ),
            (
                "vllm:spec_decode_num_draft_tokens_total",
                "counter",
                "Drafted tokens (prompt lookup).",
                stats.speculation.num_draft_tokens,
            ),
            (
                "vllm:spec_decode_num_accepted_tokens_total",
                "counter",
                "Drafted tokens the model accepted.",
                stats.speculation.num_accepted_tokens,
            ),
        ]
        lines: list[str] = []
        for name, kind, doc, value in rows:
            lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}", f"{name}{{{lab}}} {value}"]
        lines += [
            "# HELP vllm:cache_config_info KV-cache layout.",
            "# TYPE vllm:cache_config_info gauge",
            f'vllm:cache_config_info{{{lab},num_gpu_blocks="{stats.num_blocks}"}} 1',
        ]
        with self._lock:
            lines += [
                "# HELP vllm:request_success_total Finished requests by reason.",
                "# TYPE vllm:request_success_total counter",
            ]
            for reason, n in sorted(self.finished.items()):
                lines.append(f'vllm:request_success_total{{{lab},finished_reason="{reason}"}} {n}')
            for name, hist, doc in (
                ("vllm:time_to_first_token_seconds", self.ttft, "Time to first token."),
                ("vllm:inter_token_latency_seconds", self.itl, "Time between output tokens."),
                ("vllm:e2e_request_latency_seconds", self.e2e, "Whole-request latency."),
            ):
                lines += [f"# HELP {name} {doc}", f"# TYPE {name} histogram"]
                lines += hist.lines(name, lab)
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
