"""Chats share the engine: two chats' turns at once run in the same forward passes.

The engine is the real one (scheduler, paged KV cache, model runner, the backend's decoder)
over a tiny random model written here in the Hugging Face layout, with the bundled model's
tokenizer and chat template; the runner is only watched, to see how many sequences each forward
pass carries. The backend is put together as ``make_engine_backend`` does it, less the grammar
factory (no tools are offered, and importing xgrammar would take most of the test's time).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from fake_telegram import TOKEN, FakeTelegram
from loopthread import LoopThread, wait_for

from agent.loop import AgentLoop, Decoding, LoopLimits
from agent.tools import Toolbox
from connectors.access import AccessList
from connectors.gateway import Gateway, GatewayAgent, GatewayOptions
from connectors.state import GatewayState
from connectors.telegram_bot import TelegramConnector

CHATS = (111, 222)


def write_tiny_model(folder: Path) -> Path:
    """A 2-layer random Llama in the Hugging Face layout, with the bundled model's tokenizer.

    The weights are written straight from torch (transformers would take longer to import than
    the whole test takes to run).
    """
    import torch  # installed with clawloop's engine (the README's set-up installs it)
    from safetensors.torch import save_file

    from backends.engine.tokenizer import load_tokenizer
    from backends.gguf.default_model import default_model_path

    tokenizer = load_tokenizer(default_model_path())
    hidden, inner, layers, heads, kv_heads = 64, 96, 2, 4, 2
    head_dim = hidden // heads
    vocab = tokenizer.vocab_size
    raw = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": hidden,
        "intermediate_size": inner,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "max_position_embeddings": 1024,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "vocab_size": vocab,
    }
    gen = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> Any:
        return torch.randn(*shape, generator=gen) * 0.1

    weights = {
        "model.embed_tokens.weight": rand(vocab, hidden),
        "model.norm.weight": torch.ones(hidden),
        "lm_head.weight": rand(vocab, hidden),
    }
    for i in range(layers):
        at = f"model.layers.{i}."
        weights |= {
            at + "input_layernorm.weight": torch.ones(hidden),
            at + "post_attention_layernorm.weight": torch.ones(hidden),
            at + "self_attn.q_proj.weight": rand(heads * head_dim, hidden),
            at + "self_attn.k_proj.weight": rand(kv_heads * head_dim, hidden),
            at + "self_attn.v_proj.weight": rand(kv_heads * head_dim, hidden),
            at + "self_attn.o_proj.weight": rand(hidden, heads * head_dim),
            at + "mlp.gate_proj.weight": rand(inner, hidden),
            at + "mlp.up_proj.weight": rand(inner, hidden),
            at + "mlp.down_proj.weight": rand(hidden, inner),
        }
    folder.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(raw))
    tokenizer.hf.save(str(folder / "tokenizer.json"))
    settings = {
        "eos_token": "<|im_end|>",
        "bos_token": "<|im_start|>",
        "chat_template": tokenizer.chat_template,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    return folder


class BatchWatch:
    """Wraps the runner's ``execute``: records which sequences each forward pass carried."""

    def __init__(self, runner: Any) -> None:
        self.sizes: list[int] = []
        self.lock = threading.Lock()
        inner = runner.execute

        def execute(batch: Any) -> Any:
            with self.lock:
                self.sizes.append(len(batch.seq_ids))
            return inner(batch)

        runner.execute = execute


@pytest.mark.slow
def test_two_chats_turns_share_the_engines_forward_passes(
    lt: LoopThread, fake: FakeTelegram, tmp_path: Path, ws: Path
) -> None:
    from backends.base import LocalBackend
    from backends.engine.backend import EngineDecoder
    from backends.engine.core.engine_config import EngineConfig
    from backends.engine.core.llm_engine import LLMEngine
    from backends.engine.model.model_runner import ModelRunner
    from backends.local.chat_template import ChatTemplate

    folder = write_tiny_model(tmp_path / "tiny")
    engine = LLMEngine(ModelRunner(EngineConfig(folder, kv_cache_bytes=8 << 20)))
    tokenizer = engine.runner.tokenizer
    template = ChatTemplate(tokenizer.chat_template, tokenizer.bos_token, tokenizer.eos_token)
    backend = LocalBackend("engine:tiny", template, EngineDecoder(engine, tokenizer))
    watch = BatchWatch(engine.runner)
    # No tools: plain text, as long as max_tokens allows (a random model rarely ends early).
    loop = AgentLoop(
        backend, Toolbox([]), decoding=Decoding(max_tokens=96), limits=LoopLimits(max_steps=1)
    )
    state = GatewayState(tmp_path / "state.json")
    connector = TelegramConnector(TOKEN, state, fake.base_url, poll_timeout=1)
    access = AccessList(tmp_path / "pairing.json", {"telegram": [str(c) for c in CHATS]}, {})
    gateway = Gateway(
        [connector], GatewayAgent(loop), tmp_path / "sessions", access, state, GatewayOptions()
    )
    # Both messages wait on the server, so one poll delivers them together.
    for chat in CHATS:
        fake.say(chat, chat, f"hello from chat {chat}")
    lt.run(gateway.start())
    wait_for(lambda: all(fake.replies(c) for c in CHATS), 60, "both chats' answers")
    lt.run(gateway.stop())
    engine.close()
    assert len(fake.replies(CHATS[0])) == len(fake.replies(CHATS[1])) == 1
    together = sum(1 for n in watch.sizes if n >= 2)
    assert max(watch.sizes) == 2 and together >= 10, watch.sizes
