"""The relay inside the sandbox: ``127.0.0.1:PORT`` to the proxy's Unix socket, then the command.

The fallback for ``relay.c`` (:mod:`sandbox.relay_build`), where no C compiler builds it: the
same contract, at the cost of a python3 start-up per command and python3 in the view. Run as
``python3 -I -S -c SOURCE SOCKET PORT ARGV...`` (this file's text; it imports nothing of
clawloop, whose code is not in the sandbox's view). It binds the port before the command
starts, so the first request never races it, moves the relay into a grandchild that holds
none of the command's output pipes, and then becomes the command. The relay dies with the
sandbox's pid namespace when the command ends.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading


def pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends, then end ``dst``'s writing side."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def _pair(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_pair, args=(client, path), daemon=True).start()


def main(argv: list[str]) -> None:
    path, port, command = argv[0], int(argv[1]), argv[2:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    if os.fork() == 0:
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            try:
                _serve(listener, path)
            finally:
                os._exit(0)
        os._exit(0)
    os.wait()
    listener.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
