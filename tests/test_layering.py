"""Imports point one way, toward the core: agent/ and sandbox/ at the bottom, cli/ on top.

Checked on the source with ``ast`` (every import, lazy ones inside functions included), so a
back-edge fails here before it tangles the packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "sandbox", "backends", "skills", "connectors", "cli")

# What each package may import from the others (its own package is always allowed).
ALLOWED: dict[str, set[str]] = {
    "agent": set(),
    "sandbox": {"agent"},
    "backends": {"agent"},
    "skills": {"agent", "sandbox"},
    "connectors": {"agent"},
    "cli": {"agent", "sandbox", "backends", "skills", "connectors"},
}

# The engine's paging core is integers and lists: unit-testable without torch.
TORCH_FREE = ("params", "sequence", "block_manager", "scheduler", "batch", "plan", "detokenize")


def imported_roots(path: Path) -> set[str]:
    """Top-level module names imported anywhere in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_point_toward_the_core(package: str) -> None:
    wrong = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for root in imported_roots(path) & set(PACKAGES):
            if root != package and root not in ALLOWED[package]:
                wrong.append(f"{path.relative_to(ROOT)} imports {root}")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_the_engine_core_never_imports_torch() -> None:
    heavy = {"torch", "numpy", "triton", "xgrammar"}
    wrong = [
        f"backends/engine/{name}.py imports {sorted(imported_roots(path) & heavy)}"
        for name in TORCH_FREE
        if (path := ROOT / "backends" / "engine" / f"{name}.py").exists()
        and imported_roots(path) & heavy
    ]
    assert not wrong, "\n".join(wrong)
    assert (ROOT / "backends" / "engine" / "scheduler.py").exists()


def test_the_checker_sees_lazy_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from cli.main import app\n    import torch.nn\n")
    assert imported_roots(source) == {"cli", "torch"}


def test_a_chat_turn_never_calls_back_into_cli(tmp_path: Path) -> None:
    """The rule at run time too: the gateway is handed its traced runs when it is built, so a
    chat's turn executes no code of cli/ (the trace is still written)."""
    import sys
    import threading

    from agent.messages import AssistantMessage
    from agent.run_context import RunContext
    from agent.session import Session
    from agent.tools import Toolbox
    from backends.fake import FakeBackend
    from cli.config import load_settings
    from cli.wiring import build_loop, traced_runs
    from connectors.access import AccessList
    from connectors.gateway import Gateway
    from connectors.state import GatewayState

    settings = load_settings({"workspace": str(tmp_path), "data_dir": str(tmp_path / "data")})
    loop = build_loop(settings, FakeBackend([AssistantMessage(content="hi")]), Toolbox())
    access = AccessList(tmp_path / "pairing.json", {}, {})
    state = GatewayState(tmp_path / "state.json")
    runs = traced_runs(settings, loop)
    gateway = Gateway([], loop, tmp_path / "sessions", access, state, runs=runs)
    called: set[str] = set()

    def profile(frame: object, event: str, _arg: object) -> None:
        if event == "call":
            called.add(frame.f_code.co_filename)  # type: ignore[attr-defined]

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        events = list(gateway._run(Session(), "hello", RunContext()))
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert events and list(settings.traces_dir.glob("*.jsonl"))
    cli = ROOT / "cli"
    assert not sorted(f for f in called if Path(f).is_relative_to(cli))
    assert any(Path(f).is_relative_to(ROOT / "agent") for f in called)
