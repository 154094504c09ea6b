"""llama.cpp prompt states on disk: a new process starts from what an earlier one prefilled."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from agent.errors import UserError
from backends.llamacpp.prompt_cache import SUFFIX

# One process: the bundled model on llama.cpp, one greedy request twice, text and usage as JSON.
CHILD = """
import json, sys
from agent.messages import ChatRequest, UserMessage
from backends.llamacpp.backend import LlamaCppOptions, make_llamacpp_backend
options = LlamaCppOptions(threads=1, n_ctx=2048)
backend = make_llamacpp_backend(options=options, adapter=sys.argv[2] or None)
words = " ".join(f"item{i}" for i in range(150))
request = ChatRequest(
    messages=[UserMessage(content=f"Here is a list: {words}. Which item comes first?")],
    temperature=0.0,
    max_tokens=16,
)
out = []
for _ in range(2):  # the second time, llama.cpp reuses the prompt it holds in memory
    final = list(backend.generate(request))[-1]
    out.append({"text": final.message.content, "prompt": final.usage.prompt_tokens,
                "cached": final.usage.cached_tokens})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def bundled() -> None:
    from backends.gguf.default_model import default_model_path

    try:
        default_model_path()
    except UserError as exc:
        pytest.skip(exc.message)


def run_child(cache: Path, adapter: str = "none") -> list[dict[str, object]]:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(cache), adapter],
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "CLAWLOOP_CACHE_DIR": str(cache), "HOME": str(cache)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob(f"llama/*/*{SUFFIX}"))


@pytest.mark.slow
def test_a_second_process_starts_from_the_saved_prompt_as_from_one_in_memory(
    bundled: None, tmp_path: Path
) -> None:
    cold, warm = run_child(tmp_path)
    assert cold["cached"] == 0
    prompt = cold["prompt"]
    assert isinstance(prompt, int) and warm["cached"] == prompt - 1  # all but the last token
    (saved,) = entries(tmp_path)
    # A new process: the prompt's KV comes from disk, and decoding goes on exactly as it does
    # from the same KV held in memory (the last prompt token is computed on its own either way).
    from_disk, _ = run_child(tmp_path)
    assert from_disk == warm
    assert entries(tmp_path) == [saved]  # nothing new to save


@pytest.mark.slow
def test_a_damaged_state_is_a_miss_and_another_model_setup_never_reads_it(
    bundled: None, tmp_path: Path
) -> None:
    cold, _ = run_child(tmp_path)
    (saved,) = entries(tmp_path)
    data = bytearray(saved.read_bytes())
    data[-100] ^= 0xFF  # one flipped byte in the KV itself
    saved.write_bytes(bytes(data))
    again, _ = run_child(tmp_path)
    assert again == cold  # computed afresh, as the first time
    assert len(entries(tmp_path)) == 1 and entries(tmp_path)[0].read_bytes() != bytes(data)

    other, _ = run_child(tmp_path, adapter="")  # the shipped adapter: other weights, other KV
    assert other["cached"] == 0
    assert len({p.parent for p in entries(tmp_path)}) == 2
