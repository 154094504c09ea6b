"""The exec guard (``exec_guard.c``): the sandbox's first step, which bounds the inodes of its
scratch tmpfs mounts and, in a skill's program view, lets only declared programs run.

bubblewrap gives a tmpfs a size (``--size``) but no inode count, so 60,000 empty files in
``/tmp`` would be bounded only by the memory cgroup. The guard remounts ``/tmp`` and
``/dev/shm`` with ``nr_inodes`` (:func:`guard_argv`'s ``scratch``), for every command whose view
has them.

The view of a skill that is not built in holds only the programs its manifest declares
(:mod:`sandbox.programs`), but whatever a command can read or write in it could still be run:
a binary in a shown part of the workspace, or bytes written to ``/tmp``, started directly or
through the ELF loader. bubblewrap cannot mount anything ``noexec``, so there the guard also
remounts every mount of the view ``noexec`` but the declared programs' own (:func:`guard_argv`
names them), then becomes the command. Remounting needs
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
an architecture without the seccomp filter, there is no guard: the view alone holds, and the
scratch mounts' inodes are bounded by memory only; `agent doctor` says which.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sandbox import seccomp
from sandbox.helper_build import CompiledHelper, build

SOURCE = Path(__file__).with_name("exec_guard.c")
GUARD_BINARY = "/run/clawloop/exec_guard"
# What bubblewrap keeps for the guard when it runs unprivileged (dropped before the command).
UNPRIVILEGED_CAPS = ("CAP_SYS_ADMIN", "CAP_SETFCAP")
# The scratch tmpfs mounts whose inodes the guard bounds, where the view has them.
SCRATCH = ("/tmp", "/dev/shm")
_WITHOUT = "/tmp's and /dev/shm's file counts are bounded by memory only"


def compiled_guard() -> CompiledHelper | None:
    """The guard, built on first use; None without a compiler or a seccomp filter here."""
    if not seccomp.supported():
        return None
    return build(SOURCE)


def guard_argv(
    keep: list[str] | None,
    seccomp_fd: int | None,
    user: tuple[int, int] | None,
    scratch: Sequence[str] = (),
    inodes: int | None = None,
) -> list[str]:
    """The guard's command line up to ``--``: ``keep``, when given, are the only mount points
    that stay executable (a program view; None: nothing is made noexec), ``seccomp_fd`` the
    filter it loads, ``user`` the (uid, gid) to become when bubblewrap runs unprivileged,
    ``scratch`` the tmpfs mount points that may hold at most ``inodes`` inodes each."""
    args = [GUARD_BINARY]
    if scratch and inodes is not None:
        args += ["-n", str(inodes), *(a for path in scratch for a in ("-t", path))]
    if keep is not None:
        args.append("-x")
    if user is not None:
        args += ["-u", str(user[0]), "-g", str(user[1])]
    if seccomp_fd is not None:
        args += ["-s", str(seccomp_fd)]
    for path in sorted(set(keep or [])):
        args += ["-k", path]
    return [*args, "--"]


def describe() -> str:
    """Whether the guard runs here (scratch inodes bounded, a skill's program view running only
    its programs), in words (for doctor)."""
    if not seccomp.supported():
        return "no exec guard (this architecture has no seccomp filter here): " + _WITHOUT
    found = compiled_guard()
    if found is None:
        return "no exec guard, since no C compiler built exec_guard.c: " + _WITHOUT
    linked = "statically linked" if found.static else "linked to the view's libc"
    return f"exec_guard.c, {linked}, at {found.path}"
