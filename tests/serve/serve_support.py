"""Starting a real ``agent serve`` on a loopback port with the bundled model, and reading it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

KV_CACHE_BYTES = 64 << 20  # about 1,450 tokens of the bundled model's float32 KV cache


@dataclass
class Served:
    """A running server: its base URL, model name and the process."""

    base_url: str
    model: str
    process: subprocess.Popen[bytes]
    api_key: str | None = None

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(
    home: Path, api_key: str | None = None, settings: str = "", engine: str = ""
) -> Served:
    """Start ``agent serve`` with a small KV cache and wait until /health answers.

    ``settings``: top-level config lines; ``engine``: more for its [backends.engine] table."""
    pytest.importorskip("starlette")
    from agent.errors import UserError
    from backends.gguf.default_model import default_model_path

    try:
        model = default_model_path()
    except UserError as exc:
        pytest.skip(exc.message)
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.toml"
    config.write_text(
        f"{settings}[backends.engine]\nkv_cache_bytes = {KV_CACHE_BYTES}\ndevice = 'cpu'\n{engine}"
    )
    port = free_port()
    env = {**os.environ, "CLAWLOOP_CONFIG": str(config), "CLAWLOOP_DATA_DIR": str(home / "d")}
    command = [sys.executable, "-m", "cli.main", "serve", "--port", str(port)]
    if api_key:
        command += ["--api-key", api_key]
    log = open(home / "serve.log", "wb")  # noqa: SIM115 - kept open for the process's life
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    served = Served(f"http://127.0.0.1:{port}/v1", model.stem, process, api_key)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError((home / "serve.log").read_text())
        try:
            if httpx.get(f"{served.root}/health", headers=headers, timeout=2).status_code == 200:
                return served
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    process.kill()
    raise RuntimeError("agent serve did not come up in 120 s")


def stop_server(served: Served) -> None:
    served.process.terminate()
    try:
        served.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        served.process.kill()


def metric(served: Served, name: str) -> float:
    """One sample's value from /metrics (the first line for ``name``)."""
    text = httpx.get(f"{served.root}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(name)
