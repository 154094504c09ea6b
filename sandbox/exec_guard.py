"""The exec guard (``exec_guard.c``): in a skill's program view, only declared programs run.

The view of a skill that is not built in holds only the programs its manifest declares
(:mod:`sandbox.programs`), but whatever a command can read or write in it could still be run:
a binary in a shown part of the workspace, or bytes written to ``/tmp``, started directly or
through the ELF loader. bubblewrap cannot mount anything ``noexec``, so the guard starts
first in the sandbox and remounts every mount of the view ``noexec`` but the declared
programs' own (:func:`guard_argv` names them), then becomes the command. Remounting needs
``CAP_SYS_ADMIN`` over the sandbox's mounts:

- as root, bubblewrap runs as root and the guard has it; ``setpriv`` drops to the sandbox uid
  after it;
- unprivileged, bubblewrap makes the sandbox uid 0 of its user namespace and keeps
  ``CAP_SYS_ADMIN`` and ``CAP_SETFCAP`` for the guard alone, which then enters a new user
  namespace mapping the user's own uid onto it, so the command runs as the user with no
  capability over the mounts. The seccomp filter, which refuses new user namespaces, is loaded
  by the guard after that step instead of by bubblewrap (whose ``--disable-userns`` would put
  the guard in a namespace without rights over the mounts).

The guard is built like the relay (:mod:`sandbox.helper_build`). Without a C compiler, or on
an architecture without the seccomp filter, there is no guard and the view alone holds; `agent
doctor` says which.
"""

from __future__ import annotations

from pathlib import Path

from sandbox import seccomp
from sandbox.helper_build import CompiledHelper, build

SOURCE = Path(__file__).with_name("exec_guard.c")
GUARD_BINARY = "/run/clawloop/exec_guard"
# What bubblewrap keeps for the guard when it runs unprivileged (dropped before the command).
UNPRIVILEGED_CAPS = ("CAP_SYS_ADMIN", "CAP_SETFCAP")


def compiled_guard() -> CompiledHelper | None:
    """The guard, built on first use; None without a compiler or a seccomp filter here."""
    if not seccomp.supported():
        return None
    return build(SOURCE)


def guard_argv(keep: list[str], seccomp_fd: int | None, user: tuple[int, int] | None) -> list[str]:
    """The guard's command line up to ``--``: ``keep`` are the mount points that stay
    executable, ``seccomp_fd`` the filter it loads, ``user`` the (uid, gid) to become when
    bubblewrap runs unprivileged."""
    args = [GUARD_BINARY]
    if user is not None:
        args += ["-u", str(user[0]), "-g", str(user[1])]
    if seccomp_fd is not None:
        args += ["-s", str(seccomp_fd)]
    for path in sorted(set(keep)):
        args += ["-k", path]
    return [*args, "--"]


def describe() -> str:
    """Whether a skill's program view runs only its programs here, in words (for doctor)."""
    if not seccomp.supported():
        return "no exec guard: this architecture has no seccomp filter here"
    found = compiled_guard()
    if found is None:
        return "no exec guard, since no C compiler built exec_guard.c"
    linked = "statically linked" if found.static else "linked to the view's libc"
    return f"exec_guard.c, {linked}, at {found.path}"
