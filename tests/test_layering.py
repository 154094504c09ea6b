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

# Inside the engine, the same rule: the core (sequences, blocks, scheduler, step loop) is integers
# and lists and imports neither the model nor its weights; the model side may use both; the
# weights never reach up into the model or the core.
ENGINE = ROOT / "backends" / "engine"
ENGINE_ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "weights": set(),
    "model": {"core", "weights"},
}
# Plain-Python engine modules outside the core that must stay importable without torch.
TORCH_FREE = ("plan",)


def imported_modules(path: Path) -> set[str]:
    """Every dotted module name a file imports, lazy imports included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


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
    paths = sorted((ENGINE / "core").glob("*.py")) + [ENGINE / f"{n}.py" for n in TORCH_FREE]
    assert len(paths) > 10, "the engine core moved: update this test"
    wrong = [
        f"{path.relative_to(ROOT)} imports {sorted(imported_roots(path) & heavy)}"
        for path in paths
        if imported_roots(path) & heavy
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("part", sorted(ENGINE_ALLOWED))
def test_the_engine_parts_point_one_way(part: str) -> None:
    wrong = []
    for path in sorted((ENGINE / part).rglob("*.py")):
        for module in imported_modules(path):
            bits = module.split(".")
            if bits[:2] != ["backends", "engine"] or len(bits) < 3:
                continue
            other = bits[2]
            if other in ENGINE_ALLOWED and other != part and other not in ENGINE_ALLOWED[part]:
                wrong.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not wrong, "imports against the engine's layering:\n" + "\n".join(wrong)


def test_what_the_weights_import_imports_no_part() -> None:
    """The engine's top-level modules that weights/ uses (the model's shape, the tokenizer) import
    no part back, lazily or not: no circle between them and the weights."""
    used = {
        bits[2]
        for path in (ENGINE / "weights").rglob("*.py")
        for bits in (m.split(".") for m in imported_modules(path))
        if bits[:2] == ["backends", "engine"] and len(bits) > 2 and bits[2] not in ENGINE_ALLOWED
    }
    assert "config" in used, "weights/ no longer reads the config: update this test"
    wrong = [
        f"{name}.py imports {module}"
        for name in sorted(used)
        for module in imported_modules(ENGINE / f"{name}.py")
        if module.split(".")[:3] in (["backends", "engine", p] for p in ENGINE_ALLOWED)
    ]
    assert not wrong, "\n".join(wrong)


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
    from connectors.gateway import Gateway, GatewayAgent
    from connectors.state import GatewayState

    settings = load_settings({"workspace": str(tmp_path), "data_dir": str(tmp_path / "data")})
    loop = build_loop(settings, FakeBackend([AssistantMessage(content="hi")]), Toolbox())
    access = AccessList(tmp_path / "pairing.json", {}, {})
    state = GatewayState(tmp_path / "state.json")
    runs = traced_runs(settings, loop)
    gateway = Gateway([], GatewayAgent(loop, runs=runs), tmp_path / "sessions", access, state)
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
