"""``agent serve`` with float32 weights and no adapter answers as transformers' float32 model.

Free-running and through the whole served path: the official ``openai`` client sends chat
messages, the server renders them with the model's own chat template (its default system prompt
included), decodes greedily and returns text; transformers runs the same bundled GGUF
(dequantized to float32) on the same template, greedy, and its text must be identical for every
prompt. The adapter is turned off the documented way (the config's top-level ``adapter``).

Teacher-forced agreement (tests/engine/test_weight_parity.py) forgives a flipped near tie; a
free run does not: one token's difference changes the rest of the answer. float32's decode
steps on the file's 4-bit groups (int16 activations, now the ``int4-decode`` choice) flipped
such ties, and a shipped adapter silently applied would change the answers from the first few
tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from serve_support import Served, start_server, stop_server

openai = pytest.importorskip("openai")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")

pytestmark = pytest.mark.slow

# Held out: none of these is in the engine's parity tests or the adapter's training tasks.
PROMPTS = [
    "Name the five longest rivers in Europe.",
    "How do vaccines train the immune system?",
    "Give three tips for a good night's sleep.",
    "Explain photosynthesis to a ten-year-old.",
    "What causes the seasons on Earth?",
]
NEW_TOKENS = 32


@pytest.fixture(scope="module")
def float32_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = start_server(
        tmp_path_factory.mktemp("serve-parity"),
        settings='adapter = "none"\n',
        engine='weights = "float32"\n',
    )
    yield served
    stop_server(served)


def reference_texts() -> list[str]:
    """transformers' greedy answers, each prompt alone (no padding), on the model's template."""
    from backends.gguf.default_model import default_model_path

    path = default_model_path()
    folder, name = str(path.parent), path.name
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=name, dtype=torch.float32
    ).eval()
    texts = []
    # One thread: on a busy 2-core machine every op's barrier otherwise waits for a second thread
    # to be scheduled again (many times slower), and the results do not change.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with torch.inference_mode():
        for text in PROMPTS:
            ids = tokenizer.apply_chat_template(
                [{"role": "user", "content": text}],
                add_generation_prompt=True,
                return_tensors="pt",
                return_dict=True,
            )["input_ids"]
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=NEW_TOKENS,
                do_sample=False,
                pad_token_id=tokenizer.eos_token_id,
            )
            texts.append(tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True))
    torch.set_num_threads(threads)
    return texts


def test_greedy_chat_answers_are_transformers_own(float32_server: Served) -> None:
    api: Any = openai.OpenAI(
        base_url=float32_server.base_url, api_key="none", max_retries=0, timeout=120
    )
    served = []
    for text in PROMPTS:
        reply = api.chat.completions.create(
            model=float32_server.model,
            messages=[{"role": "user", "content": text}],
            temperature=0,
            max_tokens=NEW_TOKENS,
        )
        served.append(reply.choices[0].message.content or "")
    expected = reference_texts()
    differing = [
        f"{text!r}:\n  served:       {ours!r}\n  transformers: {theirs!r}"
        for text, ours, theirs in zip(PROMPTS, served, expected, strict=True)
        if ours.strip() != theirs.strip()
    ]
    assert not differing, f"{len(differing)} of {len(PROMPTS)} differ:\n" + "\n".join(differing)
