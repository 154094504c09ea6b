"""Structured logs: one JSON object per line on stderr, with every known secret taken out."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Iterable
from typing import Any

LOGGER = "clawloop.gateway"
REDACTED = "[redacted]"


class JsonFormatter(logging.Formatter):
    """``{"ts": ..., "level": ..., "event": ..., ...fields}``, secrets redacted."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        values = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(s) for s in values)) if values else None

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": round(time.time(), 3),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
        }
        data.update(getattr(record, "fields", {}))
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        text = json.dumps(data, ensure_ascii=False, default=str)
        return self._pattern.sub(REDACTED, text) if self._pattern else text


def setup_logging(secrets: Iterable[str], level: int = logging.INFO) -> logging.Logger:
    """Send the gateway's logs (and the chat libraries') to stderr as redacted JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(secrets))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logger = logging.getLogger(LOGGER)
    logger.setLevel(level)
    # httpx logs every request URL, and Telegram's URLs hold the token: keep it quiet anyway.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return logger


def log(level: int, event: str, **fields: Any) -> None:
    """Log ``event`` with structured ``fields``."""
    logging.getLogger(LOGGER).log(level, event, extra={"fields": fields})
