"""Serving load: N concurrent multi-turn chat users against ``agent serve`` and its CPU peers.

Each simulated user holds one conversation: a shared system prompt (as every agent of one
deployment sends the same instructions and tools), then ``--turns`` user messages, each sent
with the whole conversation so far, streamed greedily with ``--max-tokens`` new tokens. The
report per system and N: aggregate output tokens/s (all users' output tokens over the wall
time), p50 and p95 time to first token, and the prefix-cache hit rate (cached prompt tokens
over prompt tokens, from ``usage.prompt_tokens_details.cached_tokens`` or llama-server's
``timings.cache_n``). Every server is started fresh for each N, one at a time, with the same
GGUF (the bundled SmolLM2-135M-Instruct Q4_1), and the machine's load average is printed next
to each row, because on a shared machine the figures move with it.

Peers, in the same run:

- ``agent serve``: this engine, ``engine`` with float32 weights dequantized from the GGUF (the
  default on CPU, token-exact), ``engine-bf16`` with bfloat16 weights and KV cache.
- ``python -m llama_cpp.server``: llama-cpp-python's server; it runs one request at a time.
  Its extras are separate (``pip install 'llama-cpp-python[server]'``); ``--lcpp-python``
  points at a Python that has them.
- ``llama-server``: llama.cpp's own server with ``--parallel N`` slots and continuous batching,
  built from the llama.cpp sources vendored in the llama-cpp-python sdist, so it runs the same
  kernels as the binding. ``bench/llama_server_build.py`` holds the exact build steps (pip
  download of the sdist, cmake with Ninja, static, ``-DGGML_NATIVE=ON``) and caches the binary
  in ``~/.cache/clawloop/llama-server-<version>/`` (it took 29 minutes here on 2 shared cores).

Soak (``--soak 1000``, this engine only): that many requests from 16 concurrent clients, with
random aborts (the client closes its stream after a few chunks) and bad inputs mixed in.
Afterwards ``/metrics`` must show no request running or waiting and the KV cache empty, the
server must still answer, and its resident memory is compared with what it was after warm-up.

    python bench/serve_load.py --users 1 4 16 64 --turns 3 --max-tokens 32
    python bench/serve_load.py --systems engine --users 16
    python bench/serve_load.py --soak 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SYSTEM = (
    "You are a careful assistant inside a command-line agent. You answer in plain English, "
    "briefly and precisely. You can use tools: list_files(path) lists a folder, read(path) "
    "reads a text file, write(path, text) writes one, shell(command) runs a command in a "
    "sandbox, and search(query) looks through the project's notes. Before acting, think about "
    "which tool fits; never invent file contents; say so when you do not know. Keep answers "
    "under a hundred words unless asked for more. The user works on a Python project with a "
    "README, a pyproject.toml, a src folder and a tests folder."
)
TOPICS = [
    "lighthouses",
    "volcanoes",
    "the printing press",
    "bees",
    "glaciers",
    "chess openings",
    "bread baking",
    "the Roman roads",
    "tides",
    "paper airplanes",
    "coral reefs",
    "jazz",
    "bicycles",
    "the Moon landing",
    "origami",
    "rainforests",
]
FOLLOW_UPS = ["Tell me more.", "Why does that matter?", "Give an example.", "Summarize that."]


@dataclass
class Turn:
    ttft: float
    tokens: int
    prompt_tokens: int | None
    cached_tokens: int | None


@dataclass
class Row:
    system: str
    users: int
    turns: list[Turn] = field(default_factory=list)
    seconds: float = 0.0
    load: str = ""
    errors: int = 0

    def line(self) -> str:
        tokens = sum(t.tokens for t in self.turns)
        ttfts = sorted(t.ttft for t in self.turns)
        p50 = statistics.median(ttfts) if ttfts else float("nan")
        p95 = ttfts[min(len(ttfts) - 1, int(0.95 * len(ttfts)))] if ttfts else float("nan")
        known = [t for t in self.turns if t.cached_tokens is not None and t.prompt_tokens]
        prompt = sum(t.prompt_tokens or 0 for t in known)
        hit = f"{sum(t.cached_tokens or 0 for t in known) / prompt:.0%}" if known else "n/a"
        return (
            f"| {self.system} | {self.users} | {len(self.turns)} | {tokens} | {self.seconds:.1f} "
            f"| {tokens / self.seconds if self.seconds else 0:.1f} | {p50:.2f} | {p95:.2f} "
            f"| {hit} | {self.errors} | {self.load} |"
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def load_average() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f}/{five:.1f}"


class ServerProcess:
    """One server on a loopback port, started and stopped around a measurement."""

    def __init__(self, system: str, command: list[str], port: int, env: dict[str, str]) -> None:
        self.system = system
        self.command = command
        self.port = port
        self.env = env
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self.process: subprocess.Popen[bytes] | None = None
        # Kept open for the server's whole life; its path is printed when the server fails.
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115
            prefix=f"{system}-", suffix=".log", delete=False
        )

    def __enter__(self) -> ServerProcess:
        self.process = subprocess.Popen(
            self.command, env=self.env, stdout=self.log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.system} exited: see {self.log.name}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"{self.system} did not start: see {self.log.name}")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def model(self) -> str:
        return str(httpx.get(f"{self.base_url}/models", timeout=10).json()["data"][0]["id"])

    def rss_bytes(self) -> int:
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0


def server_for(system: str, users: int, model: Path, args: argparse.Namespace) -> ServerProcess:
    port = free_port()
    env = dict(os.environ)
    threads = str(args.threads)
    if system in ("engine", "engine-bf16"):
        config = Path(tempfile.mkdtemp()) / "config.toml"
        dtype = "bfloat16" if system == "engine-bf16" else "float32"
        config.write_text(
            "[backends.engine]\n"
            f"kv_cache_bytes = {args.kv_cache_mib << 20}\nmax_num_seqs = {max(users, 1)}\n"
            f"device = 'cpu'\ndtype = '{dtype}'\n"
        )
        env["CLAWLOOP_CONFIG"] = str(config)
        command = [sys.executable, "-m", "cli.main", "serve", "--port", str(port)]
        env["PYTHONPATH"] = str(ROOT)
    elif system == "llama-cpp-python":
        command = [
            args.lcpp_python,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--port",
            str(port),
            "--n_ctx",
            str(args.context),
            "--n_threads",
            threads,
            # By default a new request interrupts the one streaming: queue them instead.
            "--interrupt_requests",
            "False",
        ]
    elif system == "llama-server":
        from llama_server_build import build

        binary = Path(args.llama_server) if args.llama_server else build()
        command = [
            str(binary),
            "-m",
            str(model),
            "--port",
            str(port),
            "--parallel",
            str(users),
            "-c",
            str(args.context * users),
            "-t",
            threads,
            "--no-webui",
        ]
    else:
        raise SystemExit(f"unknown system {system}")
    return ServerProcess(system, command, port, env)


async def chat_turn(
    client: httpx.AsyncClient, url: str, model: str, messages: list[dict[str, str]], max_tokens: int
) -> tuple[Turn, str]:
    body = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    start = time.perf_counter()
    first: float | None = None
    pieces: list[str] = []
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    chunks = 0
    async with client.stream("POST", f"{url}/chat/completions", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {(await response.aread())[:200]!r}")
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            usage = chunk.get("usage") or usage
            timings = chunk.get("timings") or timings
            for choice in chunk.get("choices") or []:
                text = (choice.get("delta") or {}).get("content")
                if text:
                    first = first or time.perf_counter()
                    pieces.append(text)
                    chunks += 1
    prompt = cached = None
    tokens = chunks
    if usage:
        tokens = int(usage.get("completion_tokens") or chunks)
        prompt = usage.get("prompt_tokens")
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached is None and timings and "cache_n" in timings:
        cached = int(timings["cache_n"])
        prompt = int(timings.get("prompt_n", 0)) + cached
    ttft = (first or time.perf_counter()) - start
    return Turn(ttft, tokens, prompt, cached), "".join(pieces)


async def run_users(server: ServerProcess, users: int, args: argparse.Namespace) -> Row:
    model = server.model()
    row = Row(server.system, users, load=load_average())
    limits = httpx.Limits(max_connections=users + 4, max_keepalive_connections=users + 4)
    timeout = httpx.Timeout(args.request_timeout)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        # Warm-up: one short request, so that lazy initialisation is not measured.
        await chat_turn(client, server.base_url, model, [{"role": "user", "content": "Hi"}], 4)

        async def user(uid: int) -> None:
            messages = [{"role": "system", "content": SYSTEM}]
            for turn in range(args.turns):
                ask = (
                    f"Tell me about {TOPICS[uid % len(TOPICS)]} (user {uid})."
                    if turn == 0
                    else FOLLOW_UPS[(uid + turn) % len(FOLLOW_UPS)]
                )
                messages.append({"role": "user", "content": ask})
                try:
                    result, text = await chat_turn(
                        client, server.base_url, model, messages, args.max_tokens
                    )
                except (httpx.HTTPError, RuntimeError):
                    row.errors += 1
                    return
                row.turns.append(result)
                messages.append({"role": "assistant", "content": text})

        start = time.perf_counter()
        await asyncio.gather(*(user(u) for u in range(users)))
        row.seconds = time.perf_counter() - start
    row.load += f" -> {load_average()}"
    return row


# --- soak ----------------------------------------------------------------------------------------

BAD_BODIES: list[Any] = [
    b"{not json",
    {"messages": [{"role": "user", "content": "x"}]},  # model missing
    {"model": "nope", "messages": [{"role": "user", "content": "x"}]},
    {"model": "$M", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
    {"model": "$M", "messages": [{"role": "tool", "tool_call_id": "z", "content": "x"}]},
    {"model": "$M", "messages": [{"role": "user", "content": "x"}], "tool_choice": "required"},
    {"model": "$M", "messages": [{"role": "user", "content": "word " * 20000}]},
]


async def soak(server: ServerProcess, count: int, concurrency: int, seed: int) -> dict[str, Any]:
    model = server.model()
    rng = random.Random(seed)
    stats = {"ok": 0, "aborted": 0, "rejected": 0, "server_errors": 0, "unexpected": 0}
    rss: dict[str, int] = {}
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def one(client: httpx.AsyncClient, i: int) -> None:
        kind = rng.random()
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Tell me about {rng.choice(TOPICS)}."},
        ]
        body: Any = {"model": model, "messages": messages, "max_tokens": rng.randint(4, 24)}
        if kind < 0.15:
            raw = rng.choice(BAD_BODIES)
            if isinstance(raw, dict):
                raw = json.loads(json.dumps(raw).replace('"$M"', json.dumps(model)))
                response = await client.post(f"{server.base_url}/chat/completions", json=raw)
            else:
                response = await client.post(
                    f"{server.base_url}/chat/completions",
                    content=raw,
                    headers={"Content-Type": "application/json"},
                )
            key = "rejected" if 400 <= response.status_code < 500 else "unexpected"
            stats["server_errors" if response.status_code >= 500 else key] += 1
        elif kind < 0.35:
            body.update(stream=True, max_tokens=200)
            async with client.stream(
                "POST", f"{server.base_url}/chat/completions", json=body
            ) as response:
                seen = 0
                async for line in response.aiter_lines():
                    seen += line.startswith("data:")
                    if seen >= rng.randint(1, 6):
                        break  # leave mid-stream: the server must abort it
            stats["aborted"] += 1
        else:
            body["stream"] = rng.random() < 0.5
            response = await client.post(f"{server.base_url}/chat/completions", json=body)
            await response.aread()
            stats["ok" if response.status_code == 200 else "server_errors"] += 1
        if i == 100:
            rss["after_warmup"] = server.rss_bytes()

    async def worker(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            await one(client, queue.get_nowait())

    start = time.perf_counter()
    async with httpx.AsyncClient(timeout=httpx.Timeout(300.0)) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    seconds = time.perf_counter() - start
    metrics: dict[str, float] = {}
    for _ in range(100):
        metrics = read_metrics(server)
        if metrics["vllm:num_requests_running"] == 0 and metrics["vllm:num_requests_waiting"] == 0:
            break
        await asyncio.sleep(0.1)
    rss["end"] = server.rss_bytes()
    answer = httpx.post(
        f"{server.base_url}/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4},
        timeout=60,
    )
    return {
        **stats,
        "seconds": round(seconds, 1),
        "running": metrics["vllm:num_requests_running"],
        "waiting": metrics["vllm:num_requests_waiting"],
        "kv_cache_usage": metrics["vllm:kv_cache_usage_perc"],
        "still_answers": answer.status_code == 200,
        "rss_after_warmup_mib": round(rss.get("after_warmup", 0) / 2**20, 1),
        "rss_end_mib": round(rss["end"] / 2**20, 1),
        "load": load_average(),
    }


def read_metrics(server: ServerProcess) -> dict[str, float]:
    text = httpx.get(f"{server.base_url.removesuffix('/v1')}/metrics", timeout=10).text
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            values.setdefault(name, float(line.rsplit(" ", 1)[1]))
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument(
        "--systems", nargs="+", default=["engine", "llama-server", "llama-cpp-python"]
    )
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--context", type=int, default=2048, help="context per user/slot")
    parser.add_argument("--kv-cache-mib", type=int, default=1536)
    parser.add_argument("--lcpp-python", default=sys.executable)
    parser.add_argument("--llama-server", default=None, help="a llama-server binary to use")
    parser.add_argument("--request-timeout", type=float, default=900.0)
    parser.add_argument("--soak", type=int, default=0, help="run the soak with this many requests")
    args = parser.parse_args()

    from backends.gguf.default_model import default_model_path

    model = default_model_path()
    print(f"model {model.name}; {os.cpu_count()} cores; load average at start {load_average()}")
    if args.soak:
        with server_for("engine", 16, model, args) as server:
            print(json.dumps(asyncio.run(soak(server, args.soak, 16, 0)), indent=2))
        return
    print(
        "| system | users | requests | output tokens | seconds | tok/s | p50 TTFT s "
        "| p95 TTFT s | prefix hit | errors | load 1m/5m |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for users in args.users:
        for system in args.systems:
            with server_for(system, users, model, args) as server:
                print(asyncio.run(run_users(server, users, args)).line(), flush=True)


if __name__ == "__main__":
    main()
