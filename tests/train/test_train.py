"""LoRA training on a tiny random GGUF model: the loss falls, the adapter loads in both local
backends with the same greedy output, a stopped run resumes, and export -> train -> eval runs
through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("peft")
pytest.importorskip("llama_cpp")

from agent.errors import UserError
from agent.messages import ChatRequest, UserMessage
from backends.gguf.lora import read_adapter
from backends.training.trainer import StepReport, TrainSettings, train

ROOT = Path(__file__).resolve().parents[2]
WORDS = ["apple", "river", "stone", "lamp"]
EXAMPLES = [
    {
        "messages": [
            {"role": "user", "content": f"say {w}"},
            {"role": "assistant", "content": f"{w} {w} {w}"},
        ]
    }
    for w in WORDS
]
FAST = TrainSettings(epochs=6, accumulate=1, learning_rate=1e-2, rank=4)


@pytest.fixture(scope="module")
def trained(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run")
    result = train(tiny_gguf, EXAMPLES, out, FAST, {"files": ["inline"]})
    assert result.epoch_losses[-1] < 0.7 * result.epoch_losses[0], result.epoch_losses
    return out


def _greedy(backend: object, prompt: str) -> str:
    request = ChatRequest(messages=[UserMessage(content=prompt)], temperature=0, max_tokens=6)
    *_, done = backend.generate(request)  # type: ignore[attr-defined]
    return str(done.message.content)


def test_adapter_file_and_manifest(trained: Path, tiny_gguf: Path) -> None:
    adapter = read_adapter(trained / "adapter.gguf")
    assert adapter.rank == 4 and adapter.alpha == FAST.alpha
    assert "blk.0.attn_q.weight" in adapter.pairs and "blk.1.ffn_down.weight" in adapter.pairs
    a, b = adapter.pairs["blk.0.attn_k.weight"]
    assert a.shape == (4, 64) and b.shape == (32, 4)  # lora_a: rank x in, lora_b: out x rank
    manifest = json.loads((trained / "manifest.json").read_text())
    assert manifest["base_model"]["path"] == str(tiny_gguf)
    assert len(manifest["base_model"]["sha256"]) == 64
    assert manifest["settings"]["rank"] == 4 and manifest["data"]["examples"] == 4
    assert isinstance(manifest["settings"]["bf16"], bool)


def test_both_backends_load_the_adapter_and_agree(trained: Path, tiny_gguf: Path) -> None:
    from backends.engine.backend import make_engine_backend
    from backends.llamacpp.backend import make_llamacpp_backend

    adapter = str(trained / "adapter.gguf")
    prompts = [f"say {w}" for w in WORDS] + ["hello there"]
    with_llama = [_greedy(make_llamacpp_backend(tiny_gguf, adapter=adapter), p) for p in prompts]
    with_engine = [
        _greedy(make_engine_backend(str(tiny_gguf), adapter=adapter), p) for p in prompts
    ]
    assert with_llama == with_engine
    plain = [_greedy(make_llamacpp_backend(tiny_gguf, adapter="none"), p) for p in prompts]
    assert plain != with_llama  # the adapter changes what the model says


def test_the_gguf_adapter_is_the_trained_lora(trained: Path, tiny_gguf: Path) -> None:
    """transformers with the trained peft weights says what llama.cpp says with the GGUF file,
    so the tensor names, orientation, Q/K row order and scale are converted right."""
    import peft
    import torch
    import transformers

    from backends.engine.tokenizer import load_tokenizer
    from backends.llamacpp.backend import make_llamacpp_backend
    from backends.local.chat_template import ChatTemplate
    from backends.training.lora import DEFAULT_TARGETS

    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(tiny_gguf.parent), gguf_file=tiny_gguf.name, dtype=torch.float32
    )
    config = peft.LoraConfig(
        r=FAST.rank, lora_alpha=FAST.alpha, target_modules=list(DEFAULT_TARGETS)
    )
    model = peft.get_peft_model(model, config)
    peft.set_peft_model_state_dict(model, torch.load(trained / "checkpoint.pt")["lora"])
    template, tokenizer = ChatTemplate.from_gguf(tiny_gguf), load_tokenizer(tiny_gguf)
    llama = make_llamacpp_backend(tiny_gguf, adapter=str(trained / "adapter.gguf"))
    for word in WORDS:
        prompt = template.render([UserMessage(content=f"say {word}")], None, True)
        ids = torch.tensor([tokenizer.encode(prompt)])
        out = model.generate(ids, max_new_tokens=6, do_sample=False)
        theirs = tokenizer.decode(out[0, ids.shape[1] :].tolist())
        theirs = theirs.split("<|im_end|>")[0]  # llama.cpp stops at the end-of-turn token
        assert theirs.strip() == _greedy(llama, f"say {word}").strip()


def test_a_stopped_run_resumes_from_its_checkpoint(tiny_gguf: Path, tmp_path: Path) -> None:
    settings = TrainSettings(epochs=2, accumulate=1, learning_rate=1e-2, rank=2)

    def stop_in_second_epoch(step: StepReport) -> None:
        if step.epoch == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(tiny_gguf, EXAMPLES, tmp_path, settings, {}, stop_in_second_epoch)
    assert (tmp_path / "checkpoint.pt").is_file() and not (tmp_path / "adapter.gguf").exists()
    seen: list[int] = []
    result = train(tiny_gguf, EXAMPLES, tmp_path, settings, {}, lambda s: seen.append(s.epoch))
    assert result.resumed_from == 1 and set(seen) == {2} and len(result.epoch_losses) == 2
    other = TrainSettings(epochs=2, accumulate=1, learning_rate=1e-3, rank=2)
    with pytest.raises(UserError, match="other data or settings"):
        train(tiny_gguf, EXAMPLES, tmp_path, other, {})


def test_a_finished_run_goes_on_when_given_more_epochs(tiny_gguf: Path, tmp_path: Path) -> None:
    one = TrainSettings(epochs=1, accumulate=1, learning_rate=1e-2, rank=2)
    first = train(tiny_gguf, EXAMPLES, tmp_path, one, {})
    seen: list[int] = []
    three = TrainSettings(epochs=3, accumulate=1, learning_rate=1e-2, rank=2)
    result = train(tiny_gguf, EXAMPLES, tmp_path, three, {}, lambda s: seen.append(s.epoch))
    assert result.resumed_from == 1 and set(seen) == {2, 3}
    assert result.epoch_losses[0] == first.epoch_losses[0] and len(result.epoch_losses) == 3
    with pytest.raises(UserError, match="already 3 epochs long"):
        train(tiny_gguf, EXAMPLES, tmp_path, one, {})


def test_a_run_stopped_inside_an_epoch_resumes_at_its_last_step(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    settings = TrainSettings(epochs=1, accumulate=1, learning_rate=1e-2, rank=2)

    def stop_at_third(step: StepReport) -> None:
        if step.step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(tiny_gguf, EXAMPLES, tmp_path, settings, {}, stop_at_third, save_every=2)
    seen: list[int] = []
    result = train(tiny_gguf, EXAMPLES, tmp_path, settings, {}, lambda s: seen.append(s.step))
    assert seen == [3, 4] and result.resumed_from == 0 and len(result.epoch_losses) == 1


def _agent(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120", **env},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )


def test_export_train_eval_end_to_end(tiny_gguf: Path, tmp_path: Path) -> None:
    suite = tmp_path / "chat.yaml"
    suite.write_text(
        "name: chat\ntasks:\n  - id: hi\n    prompt: hello!\n    files: {}\n"
        "    check: {answer_regex: '\\w', max_calls: 0}\n"
    )
    env = {"CLAWLOOP_DATA_DIR": str(tmp_path / "data")}
    first = _agent("eval", str(suite), "-b", "fake", "--json", env=env)
    assert first.returncode == 0, first.stderr
    data = tmp_path / "good.jsonl"
    exported = _agent("traces", "export", "--grade", "good", "-o", str(data), env=env)
    assert exported.returncode == 0 and "wrote 1 conversations" in exported.stderr
    out = tmp_path / "adapter"
    trained = _agent(
        "train", "--data", str(data), "--curriculum", "3", "--model", str(tiny_gguf),
        "--epochs", "1", "--out", str(out), env=env,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    assert "bfloat16 autocast" in trained.stdout and "loss per epoch" in trained.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["data"]["files"] == [str(data)] and manifest["data"]["curriculum"]["tasks"] == 3
    adapter = str(out / "adapter.gguf")
    evaluated = _agent(
        "eval", str(suite), "-b", "llamacpp", "-m", str(tiny_gguf), "--adapter", adapter,
        "--json", env=env,
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    [variant] = json.loads(evaluated.stdout)["variants"]
    assert variant["total"] == 1
    starts = [
        json.loads(p.read_text().splitlines()[0]) for p in (tmp_path / "data" / "traces").iterdir()
    ]
    assert [s["adapter"] for s in starts if s["backend"] != "fake"] == [adapter]


def test_an_adapter_reads_back_into_the_lora_it_was_written_from(trained: Path) -> None:
    import torch
    import transformers

    from backends.training.lora import from_gguf_adapter

    lora = torch.load(trained / "checkpoint.pt")["lora"]
    config = transformers.LlamaConfig(num_attention_heads=4, num_key_value_heads=2)
    state = from_gguf_adapter(read_adapter(trained / "adapter.gguf"), list(lora), config)
    assert set(state) == set(lora)
    for key, tensor in lora.items():
        assert torch.allclose(torch.from_numpy(state[key]), tensor.float()), key


def test_a_run_started_from_an_adapter_starts_where_it_ended(
    trained: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    """The next round's first loss is the last round's, not a fresh LoRA's."""
    losses: dict[str, float] = {}

    def first(name: str) -> Callable[[StepReport], None]:
        def keep(step: StepReport) -> None:
            losses.setdefault(name, step.loss)

        return keep

    still = TrainSettings(epochs=1, accumulate=1, learning_rate=1e-9, rank=4)
    train(tiny_gguf, EXAMPLES, tmp_path / "fresh", still, {}, first("fresh"))
    start = TrainSettings(
        epochs=1, accumulate=1, learning_rate=1e-9, rank=4, start_from=str(trained / "adapter.gguf")
    )
    train(tiny_gguf, EXAMPLES, tmp_path / "next", start, {}, first("next"))
    assert losses["next"] < 0.7 * losses["fresh"], losses
    wrong = TrainSettings(epochs=1, rank=2, start_from=str(trained / "adapter.gguf"))
    with pytest.raises(UserError, match="--rank 4"):
        train(tiny_gguf, EXAMPLES, tmp_path / "wrong", wrong, {})


def test_self_play_through_the_cli_records_its_round(tiny_gguf: Path, tmp_path: Path) -> None:
    """A self-play round whose tries all fail keeps nothing, says so, and trains on the rest."""
    out = tmp_path / "round"
    trained = _agent(
        "train", "--self-play", "2", "--tries", "1", "-b", "fake", "--curriculum", "2",
        "--model", str(tiny_gguf), "--epochs", "1", "--out", str(out),
        env={"CLAWLOOP_DATA_DIR": str(tmp_path / "data")},
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    assert "self-play: 0/2 tasks passed, 0 examples kept" in trained.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["data"]["self_play"]["passed"] == 0
    assert manifest["data"]["self_play"]["tasks"] == 2 and manifest["data"]["curriculum"]
    assert (out / "self-play.jsonl").read_text() == ""
