"""Which folders may be a workspace, and what of clawloop's own may lie in one.

A sandboxed command can write anything in its workspace. In the home folder that means
``.gitconfig``, ``.ssh`` and ``.config``; in a folder that holds clawloop's own config it means
the rules and the mode of the next run (moving ``.config`` aside and writing a new
``config.toml`` switched a later call to full access). The same goes for clawloop's data
folder (the skills lock, sessions, traces, the audit log) and its skills folder: a skill
written there runs on the host at the next start. So none of them may lie in the workspace.

clawloop's own code may, as long as the sandbox keeps it read-only: a virtual environment is
mounted read-only as a whole (see :mod:`sandbox.scan`), and the package folders of a source
checkout installed in editable mode are mounted read-only by name. Without a sandbox
(``backend = "off"``) nothing is read-only, so such a workspace is refused.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agent.errors import UserError
from sandbox.scan import ENV_MARKERS

_HINT = "pass `--workspace` with a project folder instead"
# clawloop's top-level import packages; where they are is where its code runs from.
PACKAGES = ("cli", "agent", "skills", "backends", "connectors", "sandbox")


@dataclass(frozen=True, slots=True)
class OwnPlace:
    """A file or folder of clawloop's that must not be in the workspace, and how to move it."""

    path: Path
    what: str  # "data folder"
    setting: str  # "data_dir (or CLAWLOOP_DATA_DIR)"


def check_workspace(
    workspace: Path,
    homes: Iterable[Path],
    config_files: Iterable[Path],
    own: Iterable[OwnPlace] = (),
) -> None:
    """Raise :class:`UserError` (one line, with the fix) if ``workspace`` may not be used."""
    ws = Path(os.path.realpath(workspace))
    if ws == Path("/"):
        raise UserError(f"the workspace is the root folder /; {_HINT}")
    for home in homes:
        if ws == Path(os.path.realpath(home)):
            raise UserError(f"the workspace {ws} is your home folder; {_HINT}")
    places = [OwnPlace(p, "config", "CLAWLOOP_CONFIG") for p in config_files]
    for place in [*places, *own]:
        real = Path(os.path.realpath(place.path))
        if real == ws or ws in real.parents:
            raise UserError(
                f"the workspace {ws} contains clawloop's {place.what} {place.path}, which a "
                f"sandboxed command could rewrite; move it out with {place.setting}, or {_HINT}"
            )


def installation() -> list[Path]:
    """Where clawloop's code runs from: the interpreter's prefix and each package's folder."""
    found = [Path(sys.prefix)]
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or []) if spec else []:
            found.append(Path(location))
    return [Path(os.path.realpath(p)) for p in found]


def protect_installation(workspace: Path, sandboxed: bool, places: Iterable[Path]) -> list[Path]:
    """The folders of ``places`` (clawloop's installation) inside ``workspace`` to mount
    read-only: the virtual environment holding each, else the folder itself.

    :class:`UserError` when one cannot be kept read-only: there is no sandbox, or it would be
    the whole workspace.
    """
    ws = Path(os.path.realpath(workspace))
    protect: list[Path] = []
    for place in places:
        real = Path(os.path.realpath(place))
        if ws not in real.parents and real != ws:
            continue
        folder = _environment_of(real, ws) or real
        if not sandboxed or folder == ws:
            why = "there is no sandbox to keep it read-only" if folder != ws else "it is all of it"
            raise UserError(
                f"clawloop's own installation {real} lies in the workspace {ws} and {why}: a "
                f"command could change the code clawloop runs next; {_HINT}, or install "
                "clawloop outside it"
            )
        if folder not in protect:
            protect.append(folder)
    return protect


def _environment_of(path: Path, workspace: Path) -> Path | None:
    """The outermost virtual environment between ``workspace`` and ``path``, if any."""
    for folder in [*reversed(path.parents), path]:
        if folder == workspace or workspace not in folder.parents:
            continue
        if any(os.path.lexists(folder / marker) for marker in ENV_MARKERS):
            return folder
    return None
