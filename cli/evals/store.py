"""Where `agent eval` keeps each run's report: one JSON file per run in the data folder.

The file is the same object ``agent eval --json`` prints, plus when it ran, so runs can be
compared later (the web page's ``/evals`` reads this folder).
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

from cli.evals.report import dump_json


def reports_dir(data_dir: Path) -> Path:
    """The folder of stored eval reports."""
    return data_dir / "evals"


def save_report(folder: Path, report: dict[str, Any], now: dt.datetime | None = None) -> Path:
    """Write ``report`` as ``<time>-<suite>.json`` in ``folder``; returns the file."""
    when = now or dt.datetime.now(dt.UTC)
    suite = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(report.get("suite", "suite"))).strip(".-")
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{when:%Y%m%d-%H%M%S}-{suite or 'suite'}"
    path = folder / f"{stem}.json"
    n = 1
    while path.exists():  # two runs in the same second keep both reports
        n += 1
        path = folder / f"{stem}-{n}.json"
    text = dump_json({"time": when.isoformat(timespec="seconds"), **report})
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a report
    return path
