"""One thread for all of a CPU engine's tensor work, whichever thread asks for it.

torch's CPU operators and the engine's C kernels run their parallel loops on GNU OpenMP, which
keeps a team of worker threads for each thread that opens parallel regions. Once the process's
first thread has such a team, parallel regions opened from any other thread run several times
slower (measured on a 2-core machine: ``rms_norm`` of a 64x576 tensor 50 us on the first thread,
330 us on a second one; one decode step 35 ms against 70 ms). The engine loads its model on the
caller's thread and, when serving, steps on a background thread: so both go to one dedicated
thread instead, and the caller waits for the result (a handoff of a few tens of microseconds).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")
_Job = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class ComputeThread:
    """Runs functions on one long-lived daemon thread; a call from that thread runs inline.

    A daemon thread, so an engine nobody closed never holds the process open at exit.
    """

    def __init__(self, name: str = "clawloop-compute") -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the compute thread; its exception is raised here."""
        if threading.current_thread() is self._thread:
            return fn(*args, **kwargs)
        done: Future[T] = Future()
        self._jobs.put((done, fn, args, kwargs))
        return done.result()

    def close(self, timeout: float = 10.0) -> None:
        """Let the thread finish what was submitted, and wait (up to ``timeout`` seconds) until
        it has exited: its last references to tensors are gone before the interpreter shuts
        down (a daemon thread still freeing a tensor then aborts the process)."""
        self._jobs.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            done, fn, args, kwargs = job
            del job
            try:
                done.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed to the caller, who raises it
                done.set_exception(exc)
            # Hold nothing between jobs: an idle thread keeps no tensor alive.
            del done, fn, args, kwargs
