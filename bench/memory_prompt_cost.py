"""What memory costs every request: the prompt block's tokens at a few ``[memory] prompt_chars``.

A memory of two profile lines and 42 everyday facts (more than any bound here holds) is cut to
each bound and counted with the bundled model's tokenizer (SmolLM2, vocabulary only, no
weights run): ``python bench/memory_prompt_cost.py [BOUND ...]``. Needs the default model
installed (``agent models``).
"""

from __future__ import annotations

import datetime as dt
import sys
import tempfile
from pathlib import Path

from backends.gguf.default_model import default_model_path
from skills.memory.recall import prompt_block
from skills.memory.store import MemoryStore

PROFILE = ["The user's name is Ana Lima; she lives in Porto", "Answer briefly, in metric units"]
FACTS = [
    "the user's cat is called Pixel",
    "the user works as a nurse on night shifts",
    "the user's sister Bea lives in Lisbon",
    "the user is learning to play the cello",
    "the user prefers tea to coffee",
    "the user's car is a 2014 Renault Clio",
    "the user's dentist appointment is every March",
    "the user is allergic to peanuts",
    "the user's favourite author is Saramago",
    "the user runs 5 km on Sundays",
    "the user's laptop is a ThinkPad X220 running Debian",
    "the user's wifi router is in the hallway",
    "the user's daughter starts school in September",
    "the user keeps bees on the roof",
]


def main() -> None:
    import llama_cpp

    bounds = [int(a) for a in sys.argv[1:]] or [600, 1200, 2400]
    model = llama_cpp.Llama(model_path=str(default_model_path()), vocab_only=True, verbose=False)
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore(Path(tmp), lambda: dt.date(2026, 12, 3))
        for line in PROFILE:
            store.add(line, "profile")
        for line in FACTS * 3:
            store.add(line)
        for bound in bounds:
            block = prompt_block(store, bound)
            tokens = len(model.tokenize(f"\n\n{block}".encode(), add_bos=False))
            entries = block.count("\n- ")
            print(f"prompt_chars {bound}: {len(block)} chars, {entries} entries, {tokens} tokens")


if __name__ == "__main__":
    main()
