"""A small seccomp filter for sandboxed commands, as raw BPF for ``bwrap --seccomp FD``.

It refuses the calls that get past a limit the rest of the sandbox sets: ``fallocate``
reserves disk without writing (``RLIMIT_FSIZE`` does not see ``--keep-size``), io_uring
performs file and socket operations outside the usual system calls, and a new user namespace
(``unshare``/``clone`` with ``CLONE_NEWUSER``; ``clone3`` is refused so libc falls back to
``clone``) would hand the command a fresh set of capabilities to attack the kernel with.
The kernel keyring calls (``add_key``, ``request_key``, ``keyctl``) are refused too: a command
inherits the session keyring of whoever started clawloop, and possessing it is enough to read
the secrets in it (``keyctl print``) even after the drop to another uid.
``inotify_init`` and ``inotify_init1`` fail with ``EMFILE``: inotify instances are counted per
uid across the whole machine (128 by default, and a user namespace still charges its
parent's count), so one command could take them all from its user; no rlimit bounds them, and
programs that watch files fall back to polling when they get none.
In a skill's program view (:mod:`sandbox.exec_guard`) ``memfd_create`` is refused too: a
memfd lives on no mount of the view, so none of its ``noexec`` mounts covers it, and a declared
interpreter could copy any program into one and run it (``execve`` of ``/proc/self/fd/N``,
``fexecve``, or the loader given that path).
Calls made through another ABI (32-bit or x32 on x86-64) are refused as a whole, so the
numbers below cannot be dodged.
Written by hand rather than through libseccomp: it is a dozen instructions.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

# <linux/audit.h> and <linux/seccomp.h>
_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_X32_BIT = 0x40000000
# fallocate, io_uring_setup, io_uring_enter, io_uring_register, then add_key, request_key,
# keyctl
_IO_URING = {425: errno.ENOSYS, 426: errno.ENOSYS, 427: errno.ENOSYS}
_SYSCALLS = {
    "x86_64": {
        285: errno.EOPNOTSUPP,
        **_IO_URING,
        **dict.fromkeys((248, 249, 250), errno.EPERM),
    },
    "aarch64": {
        47: errno.EOPNOTSUPP,
        **_IO_URING,
        **dict.fromkeys((217, 218, 219), errno.EPERM),
    },
}
_SYSCALLS["x86_64"].update({253: errno.EMFILE, 294: errno.EMFILE})  # inotify_init, _init1
_SYSCALLS["aarch64"][26] = errno.EMFILE  # inotify_init1
# memfd_create, refused in a program view
_MEMFD_CREATE = {"x86_64": 319, "aarch64": 279}
_CLONE_NEWUSER = 0x10000000
# unshare and clone: flags are the first argument on both architectures; then clone3.
_NAMESPACE_CALLS = {"x86_64": (272, 56, 435), "aarch64": (97, 220, 435)}
# BPF opcodes
_JSET_K = 0x45
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06


def supported() -> bool:
    """Whether this machine's architecture has a filter here."""
    return platform.machine() in _ARCH


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None, program_view: bool = False) -> bytes:
    """The filter for ``machine`` (this one by default) as ``struct sock_filter`` records;
    ``program_view`` adds the calls refused in a skill's program view."""
    machine = machine or platform.machine()
    denied = dict(_SYSCALLS[machine])
    if program_view:
        denied[_MEMFD_CREATE[machine]] = errno.EPERM
    code = [
        _insn(_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        _insn(_JEQ_K, 1, 0, _ARCH[machine]),
        _insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),  # another ABI
        _insn(_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if machine == "x86_64":
        code += [_insn(_JGE_K, 0, 1, _X32_BIT), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    for nr, err in denied.items():
        code += [_insn(_JEQ_K, 0, 1, nr), _insn(_RET_K, 0, 0, _RET_ERRNO | err)]
    unshare, clone, clone3 = _NAMESPACE_CALLS[machine]
    code += [_insn(_JEQ_K, 0, 1, clone3), _insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS)]
    code += [
        _insn(_JEQ_K, 1, 0, unshare),
        _insn(_JEQ_K, 0, 3, clone),
        _insn(_LD_W_ABS, 0, 0, 16),  # seccomp_data.args[0], low half
        _insn(_JSET_K, 0, 1, _CLONE_NEWUSER),
        _insn(_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
    ]
    code.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(code)


def filter_fd(program_view: bool = False) -> int | None:
    """A fresh fd holding the filter (bwrap reads it to the end); None if unsupported."""
    if not supported():
        return None
    fd = os.memfd_create("clawloop-seccomp", 0)
    os.write(fd, program(program_view=program_view))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
