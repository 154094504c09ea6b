"""Which folders may be a workspace: never ``/``, the user's home, or one holding clawloop's config.

A sandboxed command can write anything in its workspace. In the home folder that means
``.gitconfig``, ``.ssh`` and ``.config``; in a folder that holds clawloop's own config it means
the rules and the mode of the next run (moving ``.config`` aside and writing a new
``config.toml`` switched a later call to full access).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from agent.errors import UserError

_HINT = "pass `--workspace` with a project folder instead"


def check_workspace(workspace: Path, homes: Iterable[Path], config_files: Iterable[Path]) -> None:
    """Raise :class:`UserError` (one line, with the fix) if ``workspace`` may not be used."""
    ws = Path(os.path.realpath(workspace))
    if ws == Path("/"):
        raise UserError(f"the workspace is the root folder /; {_HINT}")
    for home in homes:
        if ws == Path(os.path.realpath(home)):
            raise UserError(f"the workspace {ws} is your home folder; {_HINT}")
    for config in config_files:
        real = Path(os.path.realpath(config))
        if real == ws or ws in real.parents:
            raise UserError(f"the workspace {ws} contains clawloop's config {config}; {_HINT}")
