"""Fixtures for the skill tests: the real mail servers (see mail_servers.py)."""

from __future__ import annotations

from mail_servers import dovecot

__all__ = ["dovecot"]
