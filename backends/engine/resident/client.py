"""`agent run` on the engine through a resident host, so later runs skip loading it.

A run of the engine backend in its own process spends most of its time before the first token:
importing torch, loading and building the model. With ``keep_alive`` (seconds, default 300) the
first short-lived run starts a host process (:mod:`backends.engine.resident.host`) that keeps
the engine loaded, and every run with the same model, adapter, settings and code within that
time sends its prompts there instead: the client imports neither torch nor the model, and the
host's prefix cache is warm. Chat templates are rendered and answers parsed here, as for an
in-process engine; only prefill and decode cross the socket. ``keep_alive = 0`` keeps the
engine in the run's own process. Where no host can start, the run loads the engine itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent.errors import BackendError, UserError
from agent.messages import ChatRequest, ToolSpec, Usage
from backends.engine.resident.protocol import host_folder, host_key, receive, send, socket_path

_log = logging.getLogger(__name__)
START_TIMEOUT_S = 600.0
_POLL_S = 0.05
_LOG_CAP = 1 << 20


class RemoteDecoder:
    """A :class:`backends.base.Decoder` whose prefill and decode run in the resident host."""

    # The request crosses whole, and the host (started from this very code) holds its
    # response_format as an in-process engine does.
    supports_response_format = True

    def __init__(self, path: Path) -> None:
        self.path = path

    def decode(
        self, prompt: str, request: ChatRequest, stop: list[str], tools: list[ToolSpec] | None
    ) -> Iterator[Any]:
        from backends.base import DecodeResult

        message = {
            "prompt": prompt,
            "request": request.model_dump(mode="json", exclude={"messages"}),
            "stop": stop,
            "tools": None if tools is None else [t.model_dump(mode="json") for t in tools],
        }
        try:
            conn = _connect(self.path)
        except OSError as exc:
            raise BackendError(
                f"the resident engine at {self.path} is gone ({exc}): run again"
            ) from None
        with conn, conn.makefile("rb") as stream:  # leaving early closes it: the host aborts
            send(conn, message)
            while True:
                reply = receive(stream)
                if reply is None:
                    raise BackendError("the resident engine closed the connection mid-answer")
                if "text" in reply:
                    yield str(reply["text"])
                elif "error" in reply:
                    text = str(reply["error"])
                    raise UserError(text) if reply.get("kind") == "user" else BackendError(text)
                else:
                    usage = Usage.model_validate(reply.get("usage") or {})
                    yield DecodeResult(finish_reason=str(reply["finish_reason"]), usage=usage)
                    return


def resident_backend(options: dict[str, Any], keep_alive: int) -> Any | None:
    """A backend on the resident host for ``options`` (started if need be), or None where none
    runs or can start (the caller then loads the engine in its own process)."""
    from backends.base import LocalBackend
    from backends.local.chat_template import ChatTemplate

    if not hasattr(socket, "SO_PEERCRED"):
        return None  # Linux only: elsewhere the host could not check who connects
    model = options.get("model")
    if model and not Path(str(model)).expanduser().exists():
        return None  # loading it here says what is wrong
    options = {k: v for k, v in options.items() if k != "keep_alive"}  # not the answers' shape
    key = host_key(options)
    path = socket_path(key)
    hello = _hello(path)
    if hello is None:
        with _lock(host_folder() / f"engine-{key}.lock"):
            hello = _hello(path) or _start(path, key, options, keep_alive)
    if hello is None:
        return None
    template = ChatTemplate(
        source=hello.get("template"),
        bos_token=str(hello.get("bos_token") or ""),
        eos_token=str(hello.get("eos_token") or ""),
    )
    backend = LocalBackend(str(hello["name"]), template, RemoteDecoder(path))
    backend.adapter = Path(hello["adapter"]) if hello.get("adapter") else None
    return backend


def stop_hosts() -> list[int]:
    """Ask every resident host of this user's cache folder to exit; their process ids."""
    stopped = []
    for path in sorted(host_folder().glob("engine-*.sock")):
        with contextlib.suppress(OSError, ValueError):
            hello = _hello(path)
            with _connect(path) as conn, conn.makefile("rb") as stream:
                send(conn, {"shutdown": True})
                if receive(stream) is not None and hello is not None:
                    stopped.append(int(hello["pid"]))
    return stopped


def _connect(path: Path) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        raise
    return conn


def _hello(path: Path) -> dict[str, Any] | None:
    """The host's greeting, or None where no host answers at ``path``."""
    try:
        with _connect(path) as conn, conn.makefile("rb") as stream:
            send(conn, {"hello": True})
            reply = receive(stream)
    except (OSError, ValueError):
        return None
    return reply if reply is not None and "name" in reply else None


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """One starter at a time per host: concurrent first runs start one host, not several."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _start(path: Path, key: str, options: dict[str, Any], keep_alive: int) -> dict[str, Any] | None:
    """Start a host in its own session and wait until it answers (it loads the model first)."""
    log = host_folder() / f"engine-{key}.log"
    command = [sys.executable, "-m", "backends.engine.resident.host", str(path), str(keep_alive)]
    fresh = log.exists() and log.stat().st_size > _LOG_CAP
    with open(log, "wb" if fresh else "ab") as out:  # a log past its cap starts over
        process = subprocess.Popen(
            [*command, json.dumps(options, default=str)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        hello = _hello(path)
        if hello is not None:
            return hello
        if process.poll() is not None:
            _log.warning("the resident engine did not start (see %s): loading it here", log)
            return None
        time.sleep(_POLL_S)
    process.kill()
    _log.warning("the resident engine did not start in %.0f s: loading it here", START_TIMEOUT_S)
    return None
