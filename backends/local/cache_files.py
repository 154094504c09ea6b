"""Where clawloop's caches live, and what identifies the files a cache entry was made from."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """clawloop's cache folder: ``$CLAWLOOP_CACHE_DIR``, else the user cache folder
    (``$XDG_CACHE_HOME/clawloop``, by default ``~/.cache/clawloop``)."""
    override = os.environ.get("CLAWLOOP_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("clawloop"))


def file_identity(path: Path | None) -> str:
    """A file's (or every file in a folder's) resolved path, size and mtime: changes if it does."""
    if path is None:
        return "none"
    path = Path(path).expanduser().resolve()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    parts = [str(path)]
    for file in files:
        stat = file.stat()
        parts.append(f"{file.relative_to(path)}:{stat.st_size}:{stat.st_mtime_ns}")
    return "|".join(parts)
