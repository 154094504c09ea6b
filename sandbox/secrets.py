"""Credentials: found in config, the environment and the usual credential files, never shown.

They never reach a sandboxed process (its environment is cleared, see sandbox/runner.py, and
the user's home is not in its view), and :class:`Redactor` removes them from tool results
before the model sees them, and from traces, logs and the audit log: each value as it is, and
in the forms a command can turn it into in one step (base64, with or without padding and at
any alignment, URL-safe base64, hex in either case).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

_SECRET_KEY = re.compile(
    r"token|passw(or)?d|passphrase|secret|api[_-]?key|credential|private[_-]?key|"
    r"(^|[_.-])auth([_.-]|$)",
    re.IGNORECASE,
)
# Environment variables: well-known credentials, and any name that says token, key, secret or
# password (as a word part: ``KEY`` in ``OPENAI_API_KEY``, not in ``KEYBOARD``).
_SECRET_ENV = re.compile(
    r"(^|_)(TOKEN|KEY|SECRET|PASSWORD|PASSWD|PASS|PAT|CREDENTIALS?|AUTH)(_|$)|"
    r"^(AWS_.*|AZURE_.*_(KEY|SECRET)|GOOGLE_APPLICATION_CREDENTIALS|HF_TOKEN|"
    r"HUGGING_FACE_HUB_TOKEN|GITHUB_TOKEN|GH_TOKEN|GITLAB_TOKEN|NPM_TOKEN|"
    r"OPENAI_API_KEY|ANTHROPIC_API_KEY|.*_API_KEY|.*APIKEY.*|CLAWLOOP_.*(TOKEN|KEY|PASSWORD|SECRET).*)$",
    re.IGNORECASE,
)
# Values that are not secrets even under a secret-sounding name.
_NOT_SECRET_ENV = frozenset(
    {"SSH_AUTH_SOCK", "GPG_AGENT_INFO", "XAUTHORITY", "AWS_REGION", "AWS_DEFAULT_REGION"}
)
# Files that hold credentials, relative to a home folder.
CREDENTIAL_FILES = (
    ".netrc",
    ".git-credentials",
    ".aws/credentials",
    ".aws/config",
    ".docker/config.json",
    ".config/gh/hosts.yml",
    ".npmrc",
    ".pypirc",
    ".kube/config",
    ".config/hub",
    ".huggingface/token",
    ".cache/huggingface/token",
    ".ssh/id_rsa",
    ".ssh/id_ecdsa",
    ".ssh/id_ed25519",
    ".ssh/id_dsa",
)
_MAX_CREDENTIAL_FILE = 256 * 1024
# Short values ("1", "yes") would redact half of every output; real credentials are longer.
MIN_SECRET_LENGTH = 6
REDACTED = "[redacted]"


def is_secret_name(name: str) -> bool:
    """Whether a config key or environment variable name looks like it holds a credential."""
    if name.upper() in _NOT_SECRET_ENV:
        return False
    return bool(_SECRET_KEY.search(name)) or bool(_SECRET_ENV.search(name))


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
        if is_secret_name(name):
            found.append(value)
    return [s for s in dict.fromkeys(found) if len(s) >= MIN_SECRET_LENGTH]


def credential_file_secrets(homes: Iterable[Path]) -> list[str]:
    """Secret values in the known credential files of these home folders."""
    found: list[str] = []
    for home in homes:
        for rel in CREDENTIAL_FILES:
            path = Path(home) / rel
            try:
                if not path.is_file() or path.stat().st_size > _MAX_CREDENTIAL_FILE:
                    continue
                text = path.read_text(errors="replace")
            except OSError:
                continue
            found += _values_in(text)
    return [s for s in dict.fromkeys(found) if len(s) >= MIN_SECRET_LENGTH]


def _values_in(text: str) -> list[str]:
    """Credential-looking values in an ini, netrc, yaml, JSON or PEM file."""
    values: list[str] = []
    for match in re.finditer(r"-----BEGIN [A-Z ]*PRIVATE KEY-----(.*?)-----END", text, re.S):
        values += [line.strip() for line in match.group(1).splitlines() if len(line.strip()) > 16]
    for match in re.finditer(r"(?im)^\s*([\w.-]+)\s*[=:]\s*\"?([^\s\"#]+)", text):
        if is_secret_name(match.group(1)):
            values.append(match.group(2))
    for match in re.finditer(r"(?i)\b(password|passwd|login)\s+(\S+)", text):  # .netrc
        if match.group(1).lower() != "login":
            values.append(match.group(2))
    for match in re.finditer(r"://[^/\s:@]+:([^@\s]+)@", text):  # .git-credentials
        values.append(match.group(1))
    with contextlib.suppress(ValueError):
        _json_values(json.loads(text), "", values)
    return values


def _json_values(node: Any, key: str, out: list[str]) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            _json_values(v, str(k), out)
    elif isinstance(node, list):
        for item in node:
            _json_values(item, key, out)
    elif isinstance(node, str) and is_secret_name(key):
        out.append(node)


def encoded_forms(secret: str) -> list[str]:
    """``secret`` and what base64 and hex make of it, as substrings a text would contain.

    Base64 of a value inside a longer text depends on its alignment, so for each of the three
    alignments the characters that depend only on the secret are kept.
    """
    raw = secret.encode("utf-8")
    forms = {secret, raw.hex(), raw.hex().upper()}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for shift in range(3):
            full = encode(b"\0" * shift + raw).decode()
            start = (shift * 8 + 5) // 6  # characters touched by the alignment bytes
            end = ((shift + len(raw)) * 8) // 6  # characters fully inside the secret
            core = full[start:end]
            if len(core) >= MIN_SECRET_LENGTH:
                forms.add(core)
    return [f for f in forms if len(f) >= MIN_SECRET_LENGTH]


class Redactor:
    """Replaces every known secret, and its base64 and hex forms, with ``[redacted]``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = {s for s in secrets if len(s) >= MIN_SECRET_LENGTH}
        forms = {form for s in values for form in encoded_forms(s)}
        ordered = sorted(forms, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(s) for s in ordered)) if ordered else None

    def redact(self, text: str) -> str:
        """``text`` with the secrets taken out."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(REDACTED, text)

    def finds(self, text: str) -> bool:
        """Whether ``text`` carries a known secret (or its base64 or hex form)."""
        return self._pattern is not None and bool(text) and self._pattern.search(text) is not None

    def redact_obj(self, value: Any) -> Any:
        """The same for every string in a JSON-like value."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {k: self.redact_obj(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.redact_obj(v) for v in value]
        return value
