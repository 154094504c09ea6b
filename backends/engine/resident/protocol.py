"""What the resident engine and its clients share: where a host listens, and its messages.

A host is one process holding the engine for one set of (model, adapter, settings, code); its
key names its socket, so a run with other settings or after an upgrade starts its own host and
the old one exits when idle. Messages are JSON, one per line, over a Unix socket only the user
can open (a 0700 folder, a 0600 socket, and the peer's uid checked on accept).

A request: ``{"prompt": str, "request": ChatRequest without messages, "stop": [str],
"tools": [ToolSpec] | null}``. The host answers ``{"text": str}`` for each piece, then
``{"finish_reason": str, "usage": {...}}``, or ``{"error": str, "kind": str}``.
``{"hello": true}`` is answered with the chat template and the model's name; ``{"shutdown": true}``
makes the host exit once its requests are done.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
import sys
from pathlib import Path
from typing import Any

from agent.host import cache_root
from backends.local.cache_files import file_identity

# Unix socket paths are limited to 108 bytes on Linux; past this, the socket moves to a short
# per-user folder under /tmp.
_MAX_SOCKET_PATH = 100
_PACKAGES = ("agent", "backends")


def host_key(options: dict[str, Any]) -> str:
    """A digest of everything that shapes what a host answers."""
    digest = hashlib.sha256(json.dumps(options, sort_keys=True, default=str).encode())
    for name in ("model", "adapter"):
        value = options.get(name)
        if value and value != "none" and Path(str(value)).expanduser().exists():
            digest.update(file_identity(Path(str(value))).encode())
    digest.update(sys.executable.encode())
    digest.update(code_identity().encode())
    return digest.hexdigest()[:16]


def code_identity() -> str:
    """Sizes and mtimes of the code a host runs: a changed install gets a new host."""
    import backends

    root = Path(backends.__file__).resolve().parent.parent
    parts = []
    for package in _PACKAGES:
        for path in sorted((root / package).rglob("*")):
            if path.suffix in (".py", ".c", ".jinja", ".json") and path.is_file():
                stat = path.stat()
                parts.append(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}")
    return "|".join(parts)


def host_folder() -> Path:
    """The folder holding hosts' sockets, logs and locks (made 0700)."""
    folder = cache_root() / "resident"
    probe = folder / "engine-0123456789abcdef.sock"
    if len(str(probe)) > _MAX_SOCKET_PATH:
        folder = Path("/tmp") / f"clawloop-{os.getuid()}" / "resident"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    if folder.stat().st_uid != os.getuid():
        raise PermissionError(f"{folder} belongs to another user")
    return folder


def socket_path(key: str) -> Path:
    return host_folder() / f"engine-{key}.sock"


def peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (Linux SO_PEERCRED)."""
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)


def send(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def receive(stream: Any) -> dict[str, Any] | None:
    """The next message from ``stream`` (a binary file over the socket), or None at its end."""
    line = stream.readline()
    if not line:
        return None
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError("a resident-engine message is a JSON object")
    return message
