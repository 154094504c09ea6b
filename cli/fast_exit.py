"""End the process without the interpreter's module teardown once a command is done.

Finalizing torch's, transformers' and xgrammar's modules takes about a second after
``agent run`` on the bundled engine has already printed its answer. What a normal exit does
that matters here is done first (non-daemon threads joined, atexit functions run, the standard
streams and logging flushed); then ``os._exit`` skips the rest. clawloop's own files (sessions,
traces, the audit log) are written unbuffered and fsync'd as they go, so nothing is left in a
buffer. Commands that never loaded torch exit the ordinary way.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
from typing import NoReturn

# Modules whose teardown is slow enough to skip.
HEAVY = ("torch",)


def exit_code(code: object) -> int:
    """The status ``sys.exit(code)`` would give."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def finish(code: object) -> NoReturn:
    """Exit with ``code`` as ``sys.exit`` would, skipping module teardown after heavy imports."""
    if not any(name in sys.modules for name in HEAVY):
        sys.exit(code)  # type: ignore[arg-type]
    status = exit_code(code)
    main = threading.main_thread()
    for thread in threading.enumerate():
        if thread is not main and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe takes nothing more
            stream.flush()
    os._exit(status)
