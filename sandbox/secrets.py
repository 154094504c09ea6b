"""clawloop's own credentials: found in config and environment, kept out of every output.

They never reach a sandboxed process (its environment is cleared, see sandbox/runner.py),
and :class:`Redactor` removes them from tool results before the model sees them, and from
traces, logs and the audit log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

_SECRET_KEY = re.compile(
    r"token|password|passwd|secret|api[_-]?key|credential|private[_-]?key", re.IGNORECASE
)
_SECRET_ENV = re.compile(r"^CLAWLOOP_.*(TOKEN|KEY|PASSWORD|SECRET)", re.IGNORECASE)
# Short values ("1", "yes") would redact half of every output; real credentials are longer.
MIN_SECRET_LENGTH = 6
REDACTED = "[redacted]"


def is_secret_name(name: str) -> bool:
    """Whether a config key or environment variable name looks like it holds a credential."""
    return bool(_SECRET_KEY.search(name)) or bool(_SECRET_ENV.match(name))


def find_secrets(config: Any = None, environ: Mapping[str, str] | None = None) -> list[str]:
    """Secret values in a config tree (nested dicts/lists) and in an environment."""
    found: list[str] = []

    def walk(node: Any, key: str) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                walk(v, str(k))
        elif isinstance(node, list | tuple):
            for item in node:
                walk(item, key)
        elif isinstance(node, str) and is_secret_name(key):
            found.append(node)
        elif hasattr(node, "get_secret_value") and is_secret_name(key):
            found.append(str(node.get_secret_value()))

    walk(config, "")
    for name, value in (environ or {}).items():
        if _SECRET_ENV.match(name):
            found.append(value)
    return [s for s in dict.fromkeys(found) if len(s) >= MIN_SECRET_LENGTH]


class Redactor:
    """Replaces every known secret in a text with ``[redacted]``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(s) for s in values)) if values else None

    def redact(self, text: str) -> str:
        """``text`` with the secrets taken out."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(REDACTED, text)

    def redact_obj(self, value: Any) -> Any:
        """The same for every string in a JSON-like value."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {k: self.redact_obj(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.redact_obj(v) for v in value]
        return value
