"""The network relay as a small C program (``relay.c``), built once per machine.

A command with declared hosts starts behind the relay; as ``python3 relay.py`` that costs an
interpreter's start-up on every call and puts ``python3`` in the view of a skill that declared
only other programs. ``relay.c`` does the same with libc alone; it is built on first use
(:mod:`sandbox.helper_build`). With no compiler, or when the build fails,
:func:`compiled_relay` returns None and the sandbox keeps ``relay.py``.
``CLAWLOOP_SANDBOX_RELAY=python`` chooses ``relay.py`` even so.
"""

from __future__ import annotations

import os
from pathlib import Path

from sandbox.helper_build import CompiledHelper, build

SOURCE = Path(__file__).with_name("relay.c")
RELAY_VARIABLE = "CLAWLOOP_SANDBOX_RELAY"  # "python": relay.py, whether or not the C one builds
CompiledRelay = CompiledHelper


def compiled_relay() -> CompiledRelay | None:
    """The C relay, built on first use; None where it cannot be, or where relay.py is chosen."""
    if os.environ.get(RELAY_VARIABLE, "").strip().lower() == "python":
        return None
    return _built()


def _built() -> CompiledRelay | None:
    return build(SOURCE)


def describe() -> str:
    """Which relay a command with declared hosts gets here, in words (for ``agent doctor``)."""
    if os.environ.get(RELAY_VARIABLE, "").strip().lower() == "python":
        return f"relay.py under python3, as {RELAY_VARIABLE}=python chooses"
    found = compiled_relay()
    if found is None:
        return "relay.py under python3, since no C compiler built relay.c"
    linked = "statically linked" if found.static else "linked to the view's libc"
    return f"relay.c, {linked}, at {found.path}"
