"""The wheel holds exactly the six top-level packages, its console script, and its data files."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL = {"agent", "backends", "cli", "connectors", "sandbox", "skills"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (found,) = out.glob("clawloop-*.whl")
    return found


def test_top_level_names_are_the_six_packages(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == TOP_LEVEL
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    with zipfile.ZipFile(wheel) as zf:
        top_level_txt = zf.read(f"{dist_info}/top_level.txt").decode().split()
        entry_points = zf.read(f"{dist_info}/entry_points.txt").decode()
    assert set(top_level_txt) == TOP_LEVEL
    assert "agent = cli.main:main" in entry_points
    assert "[clawloop.backends]" in entry_points and "[clawloop.skills]" in entry_points


def test_prompts_ship_inside_the_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        assert "agent/prompts/default.md" in zf.namelist()


def test_the_sandbox_relay_source_ships_inside_the_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    assert {"sandbox/relay.c", "sandbox/relay.py"} <= names  # built on first use, its fallback


def test_the_shipped_adapter_ships_inside_the_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        info = zf.getinfo("backends/adapters/smollm2-135m-clawloop.gguf")
    assert "backends/adapters/smollm2-135m-clawloop.json" in names
    assert info.file_size <= 20 * 1024 * 1024


def test_the_built_in_chat_template_ships_inside_the_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        assert "backends/local/templates/chatml_tools.jinja" in zf.namelist()


def test_help_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['agent', '--help']\n"
        "from cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "names = ('torch', 'llama_cpp', 'transformers', 'xgrammar')\n"
        "heavy = [m for m in names if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    assert "HEAVY []" in out.stdout


def test_the_web_pages_templates_and_script_ship_inside_the_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    assert {
        "connectors/web/static/act.js",
        "connectors/web/static/chat.js",
        "connectors/web/static/ops.js",
        "connectors/web/static/style.css",
        "connectors/web/templates/chat.html.jinja",
        "connectors/web/templates/trace.html.jinja",
        "connectors/web/templates/traces.html.jinja",
    } <= names
