"""What identifies the files a cache entry was made from (the caches live under
:func:`agent.host.cache_root`)."""

from __future__ import annotations

from pathlib import Path


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
