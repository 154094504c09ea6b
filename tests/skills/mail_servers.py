"""Real mail servers on loopback for the mail tests: Dovecot (IMAP) and aiosmtpd (SMTP).

Dovecot runs in the foreground with a standalone config (a passwd-file user, Maildir in a
temporary folder, a plain port and a TLS port). aiosmtpd offers STARTTLS or implicit TLS with
AUTH, and delivers every accepted message into Dovecot with dovecot-lda, so a message sent by
the mail skill can be found again over IMAP.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import pwd
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

LDA = "/usr/lib/dovecot/dovecot-lda"
USER = "alice"
PASSWORD = "alice-mail-pass-4821"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    os.chmod(key, 0o644)  # dovecot reads it as root before dropping privileges
    return cert, key


@dataclass
class Dovecot:
    """A running Dovecot: its config file, ports and the mail user's name."""

    conf: Path
    imap_port: int
    imaps_port: int
    root: Path

    def deliver(self, raw: bytes, sender: str = "someone@example.org") -> None:
        """Put one message into alice's INBOX, as the mail server would."""
        subprocess.run([LDA, "-c", str(self.conf), "-d", USER, "-f", sender], input=raw, check=True)


def _dovecot_conf(root: Path, cert: Path, key: Path, imap: int, imaps: int) -> str:
    me = getpass.getuser()
    if os.geteuid() == 0:
        uid, internal = "nobody", "dovecot"
        login = "dovenull"
    else:
        uid = internal = login = me
    group = pwd.getpwnam(uid).pw_gid
    return f"""
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = yes
ssl_cert = <{cert}
ssl_key = <{key}
disable_plaintext_auth = no
auth_mechanisms = plain login
first_valid_uid = 1
first_valid_gid = 1
default_internal_user = {internal}
default_login_user = {login}
mail_location = maildir:{root}/mail/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = static
  args = uid={uid} gid={group} home={root}/mail/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps}
    ssl = yes
  }}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
"""


@pytest.fixture(scope="session")
def dovecot() -> Iterator[Dovecot]:
    if shutil.which("dovecot") is None or not Path(LDA).exists():
        pytest.fail("Dovecot is not installed: apt-get install -y dovecot-imapd")
    with running_dovecot() as server:
        yield server


@contextlib.contextmanager
def running_dovecot() -> Iterator[Dovecot]:
    """A Dovecot for alice on loopback, stopped and removed on exit (the fixture's, and the
    injection benchmark's)."""
    root = Path(tempfile.mkdtemp(prefix="clawloop-dovecot-"))
    os.chmod(root, 0o755)  # the mail user (nobody) must reach its Maildir
    cert, key = make_certificate(root)
    (root / "passwd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}\n")
    (root / "mail").mkdir()
    if os.geteuid() == 0:
        shutil.chown(root / "mail", "nobody")
    imap, imaps = free_port(), free_port()
    conf = root / "dovecot.conf"
    conf.write_text(_dovecot_conf(root, cert, key, imap, imaps))
    proc = subprocess.Popen(["dovecot", "-c", str(conf), "-F"], stderr=subprocess.PIPE)
    try:
        wait_for_port(imap)
        wait_for_port(imaps)
        yield Dovecot(conf, imap, imaps, root)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Smtp:
    """A running aiosmtpd and where its certificate is."""

    port: int
    cert: Path
    received: list[bytes]


class _DeliverToDovecot:
    def __init__(self, dovecot: Dovecot, received: list[bytes]) -> None:
        self.dovecot = dovecot
        self.received = received

    async def handle_DATA(self, server: object, session: object, envelope: object) -> str:
        raw = envelope.original_content or envelope.content  # type: ignore[attr-defined]
        self.received.append(raw)
        self.dovecot.deliver(raw, envelope.mail_from)  # type: ignore[attr-defined]
        return "250 OK delivered"


def _authenticator(server: object, session: object, envelope: object, mechanism: str, data: object):  # type: ignore[no-untyped-def]
    from aiosmtpd.smtp import AuthResult, LoginPassword

    ok = (
        isinstance(data, LoginPassword)
        and data.login.decode() == USER
        and data.password.decode() == PASSWORD
    )
    return AuthResult(success=ok, handled=False)


def start_smtp(dovecot: Dovecot, implicit_tls: bool = False) -> tuple[object, Smtp]:
    """aiosmtpd with STARTTLS (or implicit TLS) and AUTH, delivering into Dovecot."""
    from aiosmtpd.controller import Controller

    cert = dovecot.root / "cert.pem"
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, dovecot.root / "key.pem")
    received: list[bytes] = []
    port = free_port()
    kwargs: dict[str, object] = {"authenticator": _authenticator}
    if implicit_tls:
        kwargs |= {"ssl_context": context, "auth_require_tls": False}
    else:
        kwargs |= {"tls_context": context, "require_starttls": True, "auth_require_tls": True}
    controller = Controller(
        _DeliverToDovecot(dovecot, received), hostname="127.0.0.1", port=port, **kwargs
    )
    controller.start()
    return controller, Smtp(port, cert, received)
