"""The resident engine: one process keeping the engine loaded between short-lived runs.

`agent run` and `agent chat` on the engine start this process on first use (see
:mod:`backends.engine.resident.client`) and send it their rendered prompts; it decodes them
with the same :class:`EngineDecoder` an in-process engine uses, so the answers are the same,
and its prefix cache stays warm in memory across runs. It exits once no request has come for
``keep_alive`` seconds, or when asked (``agent engine stop``). It runs no tools and reads
nothing but the model and its caches.

    python -m backends.engine.resident.host SOCKET KEEP_ALIVE_S OPTIONS_JSON
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from agent.errors import UserError
from agent.host import bound_spin_waits
from agent.messages import ChatRequest, ToolSpec
from backends.engine.resident.protocol import peer_uid, receive, send

_log = logging.getLogger("clawloop.resident")
_ACCEPT_POLL_S = 0.5


class Host:
    """Accepts connections on ``path``; one thread per connection, one message each."""

    def __init__(self, path: Path, decoder: Any, hello: dict[str, Any], keep_alive: float) -> None:
        self.path = path
        self.decoder = decoder
        self.hello = hello
        self.keep_alive = keep_alive
        self._lock = threading.Lock()
        self._active = 0
        self._last = time.monotonic()
        self._stopping = False

    def serve(self) -> None:
        """Listen until idle for ``keep_alive`` seconds or asked to stop."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        listener.bind(str(temporary))
        os.chmod(temporary, 0o600)
        listener.listen(64)
        os.replace(temporary, self.path)  # clients see the socket only once it accepts
        inode = self.path.stat().st_ino
        listener.settimeout(_ACCEPT_POLL_S)
        try:
            while not self._done():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                if peer_uid(conn) != os.getuid():
                    conn.close()
                    continue
                threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
        finally:
            with contextlib.suppress(OSError):
                if self.path.stat().st_ino == inode:  # a newer host may have taken the name
                    self.path.unlink()
            listener.close()

    def _done(self) -> bool:
        with self._lock:
            if self._active:
                return False
            return self._stopping or time.monotonic() - self._last > self.keep_alive

    def _handle(self, conn: socket.socket) -> None:
        with self._lock:
            self._active += 1
        try:
            with conn, conn.makefile("rb") as stream:
                message = receive(stream)
                if message is None:
                    return
                if message.get("hello"):
                    send(conn, self.hello)
                elif message.get("shutdown") is True:
                    self._stopping = True
                    send(conn, {"stopping": True})
                else:
                    self._answer(conn, message)
        except (OSError, ValueError) as exc:
            _log.info("connection ended: %s", exc)
        finally:
            with self._lock:
                self._active -= 1
                self._last = time.monotonic()

    def _answer(self, conn: socket.socket, message: dict[str, Any]) -> None:
        try:
            request = ChatRequest.model_validate({**message["request"], "messages": []})
            tools = message.get("tools")
            specs = None if tools is None else [ToolSpec.model_validate(t) for t in tools]
            stream = self.decoder.decode(message["prompt"], request, message["stop"], specs)
        except (KeyError, TypeError, ValueError) as exc:
            send(conn, {"error": f"bad request to the resident engine: {exc}", "kind": "host"})
            return
        with contextlib.closing(stream):  # closing it early aborts the request in the engine
            try:
                for item in stream:
                    if isinstance(item, str):
                        send(conn, {"text": item})
                    else:
                        usage = item.usage.model_dump(mode="json")
                        send(conn, {"finish_reason": item.finish_reason, "usage": usage})
            except UserError as exc:
                send(conn, {"error": exc.message, "kind": "user"})
            except OSError:
                raise
            except Exception as exc:  # a bug: reported to the client, kept in the host's log
                _log.exception("decoding failed")
                send(conn, {"error": f"the resident engine failed: {exc}", "kind": "host"})


def main(argv: list[str] | None = None) -> int:
    """Load the engine with the given options, then serve until idle."""
    bound_spin_waits()  # before torch and the kernels load their OpenMP runtimes
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    path, keep_alive, options_json = argv if argv is not None else sys.argv[1:4]
    options = json.loads(options_json)
    from backends.engine.backend import engine_decoder, load_engine

    model = options.pop("model", None)
    adapter = options.pop("adapter", None)
    loaded = load_engine(model, adapter, **options)
    decoder = engine_decoder(loaded, options)
    hello = {
        "name": f"engine:{loaded.path.name}",
        "template": loaded.template.source,
        "bos_token": loaded.template.bos_token,
        "eos_token": loaded.template.eos_token,
        "adapter": None if loaded.adapter is None else str(loaded.adapter),
        "pid": os.getpid(),
    }
    _log.info("serving %s on %s (pid %d)", hello["name"], path, os.getpid())
    try:
        Host(Path(path), decoder, hello, float(keep_alive)).serve()
    finally:
        loaded.engine.close()
    _log.info("idle for %s s: exiting", keep_alive)
    return 0


if __name__ == "__main__":
    sys.exit(main())
