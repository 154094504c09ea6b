"""Secrets never come back: not in a command's environment, not in what the model reads.

Each attempt tries to get a credential into a tool result: printing a `.env` in the
workspace that holds the value of a well-known credential variable, encoding it first
(base64 at any alignment, hex), or reading the user's home and clawloop's own data folder
when they sit somewhere the view shows. The judge is the text the model would get, from the
real toolbox (sandbox and redaction). The controls show the judge sees the value when the
redactor is not given it.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.tools import Toolbox
from cli.approvals import AutoApprover
from sandbox.secrets import Redactor, credential_file_secrets, find_secrets
from sandbox.settings import ResourceLimits, SandboxSettings
from skills.context import Places, SkillContext
from skills.toolbox import build_toolbox

VARIABLES = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "GITHUB_TOKEN",
    "HF_TOKEN",
    "MY_SERVICE_PASSWORD",
    "DEPLOY_KEY",
    "STRIPE_SECRET",
]


def _value(name: str) -> str:
    return f"{name.lower()}-{uuid.uuid4().hex}"


def _toolbox(ws: Path, environ: dict[str, str], places: Places | None = None) -> Toolbox:
    context = SkillContext.create(
        ws,
        SandboxSettings(limits=ResourceLimits(timeout_s=10)),
        places=places or Places(),
        secrets=find_secrets({}, environ),
        environ=environ,
    )
    return build_toolbox(context, AutoApprover())


def _shell(tb: Toolbox, command: str) -> str:
    tool = tb.get("shell")
    assert tool is not None
    return tool.call({"command": command}).render()


def _leaks(text: str, secret: str) -> bool:
    """Whether ``text`` gives ``secret`` away as is, in hex, or in base64 at any alignment."""
    raw = secret.encode()
    if secret in text or raw.hex() in text.lower():
        return True
    for shift in range(3):
        b64 = base64.b64encode(b"\0" * shift + raw).decode()
        if b64[(shift * 8 + 5) // 6 : ((shift + len(raw)) * 8) // 6] in text:
            return True
    return False


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


ENCODINGS = {
    "cat": "cat .env",
    "base64": "base64 -w0 .env",
    "base64-shifted": "(printf x; cat .env) | base64 -w0",
    "base64-shifted-2": "(printf xy; cat .env) | base64 -w0",
    "hex": "python3 -c \"print(open('.env','rb').read().hex())\"",
    "hex-upper": "python3 -c \"print(open('.env','rb').read().hex().upper())\"",
}


@pytest.mark.parametrize("name", VARIABLES)
def test_a_credential_variable_never_comes_back(ws: Path, name: str) -> None:
    secret = _value(name)
    (ws / ".env").write_text(f"{name}={secret}\n")
    tb = _toolbox(ws, {name: secret, "HOME": str(ws.parent)})
    for command in ("cat .env", "env; echo $" + name):
        assert not _leaks(_shell(tb, command), secret), command


@pytest.mark.parametrize("command", ENCODINGS.values(), ids=ENCODINGS.keys())
def test_an_encoded_secret_never_comes_back(ws: Path, command: str) -> None:
    secret = _value("OPENAI_API_KEY")
    (ws / ".env").write_text(f"OPENAI_API_KEY={secret}\n")
    tb = _toolbox(ws, {"OPENAI_API_KEY": secret})
    assert not _leaks(_shell(tb, command), secret)


@pytest.mark.parametrize("command", ENCODINGS.values(), ids=ENCODINGS.keys())
def test_control_the_judge_sees_an_unredacted_secret(ws: Path, command: str) -> None:
    secret = _value("OPENAI_API_KEY")
    (ws / ".env").write_text(f"OPENAI_API_KEY={secret}\n")
    tb = _toolbox(ws, {})  # the redactor is not told
    assert _leaks(_shell(tb, command), secret)


def test_credential_file_contents_never_come_back(ws: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    key = f"aws-{uuid.uuid4().hex}"
    (home / ".aws" / "credentials").write_text(
        f"[default]\naws_access_key_id = AKIA{uuid.uuid4().hex[:12].upper()}\n"
        f"aws_secret_access_key = {key}\n"
    )
    token = f"ghp_{uuid.uuid4().hex}"
    (home / ".git-credentials").write_text(f"https://me:{token}@github.example.invalid\n")
    netrc = f"netrc-{uuid.uuid4().hex}"
    (home / ".netrc").write_text(f"machine h.example.invalid login me password {netrc}\n")
    assert {key, token, netrc} <= set(credential_file_secrets([home]))
    # The workspace holds copies (say, a config the model was asked to debug).
    (ws / "copy.txt").write_text(f"{key}\n{token}\n{netrc}\n")
    tb = _toolbox(ws, {"HOME": str(home)})
    out = _shell(tb, "cat copy.txt; base64 -w0 copy.txt")
    for secret in (key, token, netrc):
        assert not _leaks(out, secret)


@pytest.fixture
def service_home() -> Iterator[Path]:
    """A home folder outside /home and /root, where the sandbox's view would show it."""
    home = Path(os.environ.get("HOME", "/nonexistent"))
    if home.is_dir() and str(home).startswith("/opt/"):
        yield home  # the unprivileged test user's home is made there
        return
    if not os.access("/opt", os.W_OK):
        pytest.fail("no home under /opt to test with, and /opt is not writable", pytrace=False)
    home = Path(f"/opt/clawloop-test-home-{uuid.uuid4().hex[:8]}")
    home.mkdir()
    try:
        yield home
    finally:
        for p in sorted(home.rglob("*"), reverse=True):
            p.unlink() if not p.is_dir() or p.is_symlink() else p.rmdir()
        home.rmdir()


def test_a_home_outside_home_is_hidden(ws: Path, service_home: Path) -> None:
    marker = f"svc-{uuid.uuid4().hex}"
    name = f"private-{uuid.uuid4().hex[:8]}.txt"
    (service_home / name).write_text(f"{marker}\n")
    try:
        tb = _toolbox(ws, {"HOME": str(service_home)})
        out = _shell(tb, f"ls -a {service_home}; cat {service_home}/*")
        assert marker not in out and name not in out
        control = SkillContext.create(ws, SandboxSettings(backend="off"))
        seen = control.runner.run(["bash", "-c", f"ls -a {service_home}; cat {service_home}/*"])
        assert marker in seen.stdout  # the judge sees the home where it is not hidden
    finally:
        (service_home / name).unlink()


def test_clawloop_data_folder_is_hidden_wherever_it_is(ws: Path, service_home: Path) -> None:
    data = service_home / "clawloop-data"
    data.mkdir(exist_ok=True)
    (data / "audit.jsonl").write_text('{"detail": "private audit"}\n')
    tb = _toolbox(
        ws, {"HOME": "/nonexistent"}, Places(data_dir=data, audit_path=data / "audit.jsonl")
    )
    out = _shell(tb, f"ls -a {data}; cat {data}/audit.jsonl; echo x >> {data}/audit.jsonl")
    assert "private audit" not in out
    assert (data / "audit.jsonl").read_text().startswith('{"detail": "private audit"}\n')


def test_redaction_of_names_and_forms() -> None:
    environ = {name: _value(name) for name in VARIABLES}
    environ |= {"KEYBOARD": "us-intl-layout", "GIT_AUTHOR_NAME": "Some Author", "TERM": "xterm-256"}
    found = set(find_secrets({}, environ))
    assert {environ[name] for name in VARIABLES} <= found
    assert not {"us-intl-layout", "Some Author", "xterm-256"} & found
    redactor = Redactor([environ["HF_TOKEN"]])
    assert _leaks(environ["HF_TOKEN"], environ["HF_TOKEN"])
    assert not _leaks(
        redactor.redact(base64.b64encode(environ["HF_TOKEN"].encode()).decode()),
        environ["HF_TOKEN"],
    )
