"""No shared writable places: the host's world-writable folders and unix sockets are not there.

Each attempt writes into a folder every user can write on the host, or connects to a unix
socket this test listens on; the judge looks on the host for the file or the connection.
The controls run the same attempts with the sandbox off.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sbx_support import RunFn


@dataclass
class UnixListener:
    """A unix socket server on the host that records every connection."""

    path: str  # a file path, or "@name" for the abstract namespace
    hits: list[str] = field(default_factory=list)

    def start(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        address = "\0" + self.path[1:] if self.path.startswith("@") else self.path
        sock.bind(address)
        if not self.path.startswith("@"):
            os.chmod(self.path, 0o777)  # reachable by any uid, so only the sandbox can stop it
        sock.listen(8)
        sock.settimeout(0.05)

        def serve() -> None:
            while sock.fileno() != -1:
                try:
                    conn, _ = sock.accept()
                    self.hits.append("unix")
                    conn.close()
                except OSError:
                    if sock.fileno() == -1:
                        return

        threading.Thread(target=serve, daemon=True).start()
        return sock


def _writable_dirs() -> list[str]:
    """Host folders every user can write; /run/user/UID and /run when they exist and we can."""
    dirs = ["/tmp", "/var/tmp", "/dev/shm"]
    run_user = f"/run/user/{os.getuid()}"
    dirs += [d for d in (run_user, "/run") if os.path.isdir(d) and os.access(d, os.W_OK)]
    return dirs


SOCKET_PLACES = ["/tmp", "/var/tmp", "/dev/shm", "/run", "workspace", "abstract"]


@pytest.fixture
def unix_listener(request: pytest.FixtureRequest, workspace: Path) -> Iterator[UnixListener]:
    place = request.param
    name = f"clawloop-test-{uuid.uuid4().hex[:8]}.sock"
    if place == "abstract":
        path = "@" + name
    elif place == "workspace":
        path = str(workspace / name)
    else:
        if not os.access(place, os.W_OK):
            pytest.skip(f"{place} is not writable by this user, so no host socket can be there")
        path = f"{place}/{name}"
    listener = UnixListener(path)
    sock = listener.start()
    yield listener
    sock.close()
    if not path.startswith("@"):
        Path(path).unlink(missing_ok=True)


CONNECT = (
    'python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); '
    "a=sys.argv[1]; s.connect(chr(0)+a[1:] if a[0]=='@' else a); print('REACHED')\" {path}; "
    "nc -U -w 1 {path} </dev/null 2>/dev/null; true"
)


@pytest.mark.parametrize("unix_listener", SOCKET_PLACES, indirect=True)
def test_host_unix_sockets_cannot_be_reached(run: RunFn, unix_listener: UnixListener) -> None:
    result = run(CONNECT.format(path=unix_listener.path), timeout=10)
    time.sleep(0.2)
    assert unix_listener.hits == [], f"reached {unix_listener.path}: {result.stdout}"
    assert "REACHED" not in result.stdout


@pytest.mark.parametrize("unix_listener", SOCKET_PLACES, indirect=True)
def test_control_host_unix_sockets_are_reached_without_the_sandbox(
    run: RunFn, unix_listener: UnixListener
) -> None:
    run(CONNECT.format(path=unix_listener.path), timeout=10, backend="off")
    time.sleep(0.2)
    assert unix_listener.hits, "the judge did not see a connection that happened"


@pytest.mark.parametrize("folder", ["/tmp", "/var/tmp", "/dev/shm", "/run", "/run/user"])
def test_shared_folders_are_private(run: RunFn, folder: str) -> None:
    name = f"clawloop-shared-{uuid.uuid4().hex[:8]}"
    host_dirs = [d for d in _writable_dirs() if d == folder or d.startswith(folder + "/")]
    script = (
        f"for d in {folder} {folder}/$(id -u) {' '.join(host_dirs)}; do echo x > $d/{name}; done"
    )
    try:
        run(script)
        for d in [folder, *host_dirs]:
            assert not Path(d, name).exists(), f"wrote {d}/{name} on the host"
    finally:
        for d in [folder, *host_dirs]:
            Path(d, name).unlink(missing_ok=True)


def test_control_shared_folder_written_without_the_sandbox(run: RunFn) -> None:
    name = f"clawloop-shared-{uuid.uuid4().hex[:8]}"
    try:
        run(f"echo x > /var/tmp/{name}", backend="off")
        assert Path("/var/tmp", name).exists()
    finally:
        Path("/var/tmp", name).unlink(missing_ok=True)


@pytest.mark.parametrize("folder", ["/tmp", "/var/tmp", "/dev/shm"])
def test_host_files_in_shared_folders_are_not_visible(run: RunFn, folder: str) -> None:
    if not os.access(folder, os.W_OK):
        pytest.skip(f"{folder} is not writable by this user")
    marker = Path(folder, f"clawloop-host-{uuid.uuid4().hex[:8]}")
    marker.write_text("host data\n")
    try:
        result = run(f"ls -a {folder}; cat {marker}")
        assert marker.name not in result.stdout and "host data" not in result.stdout
        control = run(f"ls -a {folder}; cat {marker}", backend="off")
        assert marker.name in control.stdout  # the judge does see the file when it is there
    finally:
        marker.unlink(missing_ok=True)


@pytest.mark.parametrize("folder", ["/home", "/root", "/srv", "/mnt", "/var", "/run", "/", "/dev"])
def test_empty_places_are_read_only(run: RunFn, folder: str) -> None:
    name = f"clawloop-ro-{uuid.uuid4().hex[:8]}"
    result = run(f"echo x > {folder}/{name} && echo WROTE; mkdir {folder}/{name}.d && echo WROTE")
    assert "WROTE" not in result.stdout
    assert not Path(folder, name).exists() and not Path(folder, name + ".d").exists()
