"""The memory tests' toolbox, built as the product builds it."""

from __future__ import annotations

from pathlib import Path

from agent.tools import Toolbox
from sandbox.settings import SandboxSettings
from skills.context import Places, SkillContext
from skills.memory.config import MemorySettings
from skills.toolbox import build_toolbox


def memory_toolbox(
    tmp_path: Path, skills: list[str] | None = None, memory: MemorySettings | None = None
) -> Toolbox:
    """The toolbox of ``skills`` (memory alone by default) for a workspace and data folder in
    ``tmp_path``, with ``[memory]`` as given, and no OS sandbox."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    context = SkillContext.create(
        ws,
        SandboxSettings(backend="off"),
        places=Places(data_dir=tmp_path / "data"),
        environ={},
        options={"memory": memory or MemorySettings()},
    )
    return build_toolbox(context, None, skills or ["memory"], check_sandbox=False)
