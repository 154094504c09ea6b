"""Hot reload: a watchdog observer on the skills folder and the lock file.

When a skill is added, changed or removed, or approved again, the running agent's toolbox is
rebuilt in place after a short quiet period; a changed skill stays disabled until it is
approved (the lock file changes then, which triggers another reload).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from agent.errors import UserError
from skills.guard import Approver
from skills.toolbox import LiveToolbox, SkillSet, guard, lock_file, skills_dir

QUIET_S = 0.3


class SkillWatcher:
    """Rebuilds ``toolbox`` from ``skillset`` whenever the skills on disk change."""

    def __init__(
        self,
        skillset: SkillSet,
        toolbox: LiveToolbox,
        approver: Approver | None,
        on_reload: Callable[[str], None] = lambda _message: None,
        save_rule: Callable[[str], object] | None = None,
    ) -> None:
        self.skillset = skillset
        self.toolbox = toolbox
        self.approver = approver
        self.on_reload = on_reload
        self.save_rule = save_rule  # the same "always" keeper the first toolbox had
        self._timer: threading.Timer | None = None
        self._guard = threading.Lock()
        self._observer: Any = None
        self.reloads = 0  # how many rebuilds have finished (tests wait on it)

    def start(self) -> None:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        watcher = self

        class Handler(FileSystemEventHandler):
            def __init__(self, only: str | None = None) -> None:
                self.only = only  # in the data folder, only the lock file matters

            def on_any_event(self, event: Any) -> None:
                if event.event_type in ("opened", "closed_no_write"):
                    return
                paths = {str(event.src_path), str(getattr(event, "dest_path", "") or "")}
                if all("/__pycache__" in p or not p for p in paths):
                    return  # Python's own byte code, written when a skill file is imported
                if self.only is None or self.only in paths:
                    watcher.changed()

        folder = skills_dir(self.skillset.context)
        lock = lock_file(self.skillset.context)
        observer = Observer()
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            observer.schedule(Handler(), str(folder), recursive=True)
        if lock is not None:
            lock.path.parent.mkdir(parents=True, exist_ok=True)
            observer.schedule(Handler(str(lock.path)), str(lock.path.parent), recursive=False)
        observer.daemon = True
        observer.start()
        self._observer = observer

    def changed(self) -> None:
        """Something moved on disk: reload once things are quiet."""
        with self._guard:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(QUIET_S, self.reload)
            self._timer.daemon = True
            self._timer.start()

    def reload(self) -> None:
        before = set(self.toolbox.names())
        try:
            self.skillset.load()
        except UserError as exc:
            self.reloads += 1
            self.on_reload(f"skills not reloaded: {exc.message}")
            return
        self.toolbox.replace(guard(self.skillset, self.approver, self.save_rule))
        self.reloads += 1
        after = set(self.toolbox.names())
        parts = [f"+{n}" for n in sorted(after - before)] + [
            f"-{n}" for n in sorted(before - after)
        ]
        disabled = ", ".join(f"{n} ({why})" for n, why in self.skillset.disabled.items())
        note = f"; waiting for approval: {disabled}" if disabled else ""
        self.on_reload(f"skills reloaded: {' '.join(parts) or 'no tool changed'}{note}")

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)


__all__ = ["SkillWatcher"]
