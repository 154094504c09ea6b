"""Errors, in three families named for who caused them.

- :class:`ToolError`: the model made a mistake (bad arguments, a failing command); its message
  goes back to the model as an observation so it can try again.
- :class:`UserError`: the person running clawloop must fix something (config, a missing model,
  an uninstalled extra); the CLI prints its message as one line and exits non-zero.
- Anything else is a bug and propagates.
"""

from __future__ import annotations


class ToolError(Exception):
    """A tool call failed in a way the model can correct; the message is written for the model."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UserError(Exception):
    """Something the user must fix; the message says what to do, in one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BackendError(UserError):
    """A backend could not serve the request (server down, model failed to load)."""


class ConfigError(UserError):
    """The configuration is invalid; the message names the key and where it is."""
