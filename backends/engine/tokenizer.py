"""The engine's tokenizer: a `tokenizers.Tokenizer` from tokenizer.json or from GGUF metadata."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from agent.errors import UserError
from backends.engine.config import GGUF_INSTALL_HINT
from backends.gguf.reader import GGUFFile, read_gguf

# Split regexes of llama.cpp's byte-level pre-tokenizers (tokenizer.ggml.pre), as in the models'
# own tokenizer.json files. Names not listed fall back to GPT-2's ByteLevel regex.
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SPLITS = {
    "llama3": _LLAMA3_SPLIT,
    "llama-v3": _LLAMA3_SPLIT,
    "llama-bpe": _LLAMA3_SPLIT,
    "smaug-bpe": _LLAMA3_SPLIT,
    "dbrx": _LLAMA3_SPLIT,
    "qwen2": _QWEN2_SPLIT,
    "deepseek-r1-qwen": _QWEN2_SPLIT,
}
# Pre-tokenizers that are GPT-2's regex with every digit split apart (SmolLM's tokenizer.json).
_DIGIT_SPLIT = {"smollm", "starcoder", "refact"}
_CONTROL, _USER_DEFINED = 3, 4  # llama.cpp token types


@lru_cache(maxsize=1)
def byte_alphabet() -> dict[int, str]:
    """GPT-2's reversible map from each byte to a printable unicode character."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {byte: chr(char) for byte, char in zip(printable, chars, strict=True)}


class EngineTokenizer:
    """Text <-> token ids for the engine; special tokens written in text map to their ids."""

    def __init__(
        self,
        hf: Any,
        eos_token_ids: list[int],
        bos_token: str,
        eos_token: str,
        chat_template: str | None,
        byte_level: bool,
    ) -> None:
        self.hf = hf
        self.vocab_size: int = hf.get_vocab_size(with_added_tokens=True)
        self.eos_token_ids = eos_token_ids
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.chat_template = chat_template
        self._byte_level = byte_level
        self._token_bytes: list[bytes] | None = None

    def to_state(self) -> dict[str, Any]:
        """Plain data that :meth:`from_state` turns back into an equal tokenizer."""
        return {
            "tokenizer_json": self.hf.to_str(),
            "eos_token_ids": list(self.eos_token_ids),
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
            "chat_template": self.chat_template,
            "byte_level": self._byte_level,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> EngineTokenizer:
        """The tokenizer :meth:`to_state` described."""
        from tokenizers import Tokenizer

        return cls(
            Tokenizer.from_str(state["tokenizer_json"]),
            [int(i) for i in state["eos_token_ids"]],
            str(state["bos_token"]),
            str(state["eos_token"]),
            state["chat_template"],
            bool(state["byte_level"]),
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; no BOS is added (the chat template writes its own markers)."""
        return list(self.hf.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """Text of ``ids`` (partial UTF-8 sequences come out as U+FFFD)."""
        return str(self.hf.decode(ids, skip_special_tokens=skip_special_tokens))

    def id_to_token_bytes(self) -> list[bytes]:
        """The raw bytes each token id stands for, for grammar libraries."""
        if self._token_bytes is None:
            self._token_bytes = self._compute_token_bytes()
        return self._token_bytes

    def _compute_token_bytes(self) -> list[bytes]:
        decode_char = {char: byte for byte, char in byte_alphabet().items()}
        added = {index: tok.content for index, tok in self.hf.get_added_tokens_decoder().items()}
        out: list[bytes] = []
        for index in range(self.vocab_size):
            token = self.hf.id_to_token(index) or ""
            if index in added:
                out.append(added[index].encode())
            elif self._byte_level and all(ch in decode_char for ch in token):
                out.append(bytes(decode_char[ch] for ch in token))
            elif token.startswith("<0x") and token.endswith(">") and len(token) == 6:
                out.append(bytes([int(token[3:5], 16)]))  # sentencepiece byte fallback
            else:
                out.append(token.replace("\u2581", " ").encode())
        return out


def tokenizer_from_gguf(reader: GGUFFile) -> EngineTokenizer:
    """Rebuild the tokenizer llama.cpp would use from a GGUF file's tokenizer.ggml.* metadata
    (read with its arrays)."""
    model = reader.get("tokenizer.ggml.model")
    tokens: list[str] = reader.get("tokenizer.ggml.tokens") or []
    types: list[int] = reader.get("tokenizer.ggml.token_type") or [1] * len(tokens)
    if model == "gpt2":
        merges: list[str] = reader.get("tokenizer.ggml.merges") or []
        pre = str(reader.get("tokenizer.ggml.pre", "default"))
        hf = build_byte_level_bpe(tokens, merges, types, pre)
    elif model == "llama":
        scores: list[float] = reader.get("tokenizer.ggml.scores") or [0.0] * len(tokens)
        prefix = bool(reader.get("tokenizer.ggml.add_space_prefix", True))
        hf = build_sentencepiece_bpe(tokens, scores, types, prefix)
    else:
        raise UserError(
            f"the bundled engine reads BPE tokenizers from GGUF files (gpt2 or llama), not "
            f"{model!r}: use a Hugging Face folder with tokenizer.json, or the llama.cpp backend"
        )

    def token_at(key: str) -> tuple[int | None, str]:
        index = reader.get(key)
        return (int(index), tokens[int(index)]) if index is not None else (None, "")

    _, bos = token_at("tokenizer.ggml.bos_token_id")
    eos_id, eos = token_at("tokenizer.ggml.eos_token_id")
    eot_id, _ = token_at("tokenizer.ggml.eot_token_id")
    eos_ids = sorted({i for i in (eos_id, eot_id) if i is not None})
    template = reader.get("tokenizer.chat_template")
    return EngineTokenizer(hf, eos_ids, bos, eos, template, byte_level=model == "gpt2")


def build_byte_level_bpe(tokens: list[str], merges: list[str], types: list[int], pre: str) -> Any:
    """A byte-level BPE `tokenizers.Tokenizer` from vocabulary, merges and llama.cpp token types."""
    try:
        from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    except ImportError as exc:
        raise UserError(
            f"the engine tokenizer needs the tokenizers package: {GGUF_INSTALL_HINT}"
        ) from exc
    alphabet = byte_alphabet()
    allowed = set(alphabet.values())
    # Tokens outside the byte alphabet (rare mislabelled specials) are respelled byte by byte.
    vocab = {
        (tok if set(tok) <= allowed else "".join(alphabet[b] for b in tok.encode())): index
        for index, tok in enumerate(tokens)
    }
    pairs = [(left, right) for left, _, right in (m.partition(" ") for m in merges)]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre in _SPLITS:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(_SPLITS[pre]), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    elif pre in _DIGIT_SPLIT:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level]
        )
    else:
        tokenizer.pre_tokenizer = byte_level
    tokenizer.decoder = decoders.ByteLevel()
    special = [
        AddedToken(tok, normalized=False, special=True)
        for tok, kind in zip(tokens, types, strict=False)
        if kind == _CONTROL and set(tok) <= allowed
    ]
    tokenizer.add_special_tokens(special)
    user = [
        AddedToken(tok, normalized=False, special=False)
        for tok, kind in zip(tokens, types, strict=False)
        if kind == _USER_DEFINED and tok in vocab
    ]
    if user:
        tokenizer.add_tokens(user)
    return tokenizer


def build_sentencepiece_bpe(
    tokens: list[str], scores: list[float], types: list[int], add_prefix_space: bool
) -> Any:
    """A SentencePiece-style BPE (Llama 2, Mistral) from a vocabulary with scores: merges are
    recovered from the scores, bytes missing from the vocabulary fall back to <0xXX> tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {tok: index for index, tok in enumerate(tokens)}
    candidates = []
    for tok, score in zip(tokens, scores, strict=False):
        splits = [
            (tok[:cut], tok[cut:])
            for cut in range(1, len(tok))
            if tok[:cut] in vocab and tok[cut:] in vocab
        ]
        splits.sort(key=lambda pair: (vocab[pair[0]], vocab[pair[1]]))
        candidates += [(score, left, right) for left, right in splits]
    candidates.sort(key=lambda c: (c[0], len(c[1]), len(c[2])), reverse=True)
    merges = [(left, right) for _, left, right in candidates]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=True, byte_fallback=True))
    scheme = "first" if add_prefix_space else "never"
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="\u2581", prepend_scheme=scheme, split=False
    )
    steps = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    if add_prefix_space:
        steps.append(decoders.Strip(content=" ", left=1))
    tokenizer.decoder = decoders.Sequence(steps)
    tokenizer.add_special_tokens(
        [
            AddedToken(t, normalized=False, special=True)
            for t, k in zip(tokens, types, strict=False)
            if k == _CONTROL
        ]
    )
    user = [
        AddedToken(t, normalized=False)
        for t, k in zip(tokens, types, strict=False)
        if k == _USER_DEFINED
    ]
    if user:
        tokenizer.add_tokens(user)
    return tokenizer


def tokenizer_from_folder(folder: Path) -> EngineTokenizer:
    """The tokenizer of a Hugging Face folder: tokenizer.json plus tokenizer_config.json."""
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise UserError(
            f"the engine tokenizer needs the tokenizers package: {GGUF_INSTALL_HINT}"
        ) from exc
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise UserError(f"{folder} has no tokenizer.json (the engine needs a fast tokenizer file)")
    hf = Tokenizer.from_file(str(path))
    settings = _read_json(folder / "tokenizer_config.json")
    bos = _token_text(settings.get("bos_token"))
    eos = _token_text(settings.get("eos_token"))
    template = settings.get("chat_template")
    if isinstance(template, list):  # a list of named templates: take the default one
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    jinja = folder / "chat_template.jinja"
    if template is None and jinja.is_file():
        template = jinja.read_text()
    eos_ids: set[int] = set()
    eos_id = hf.token_to_id(eos) if eos else None
    if eos_id is not None:
        eos_ids.add(int(eos_id))
    generation = _read_json(folder / "generation_config.json").get("eos_token_id")
    if isinstance(generation, int):
        eos_ids.add(generation)
    elif isinstance(generation, list):
        eos_ids.update(int(i) for i in generation)
    pre = hf.pre_tokenizer
    byte_level = pre is not None and "ByteLevel" in repr(pre)
    return EngineTokenizer(hf, sorted(eos_ids), bos, eos, template, byte_level=byte_level)


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _token_text(value: object) -> str:
    if isinstance(value, dict):
        return str(value.get("content", ""))
    return str(value) if value is not None else ""


def load_tokenizer(path: Path) -> EngineTokenizer:
    """The tokenizer for a model path: a .gguf file or a Hugging Face folder."""
    path = Path(path).expanduser()
    if path.is_dir():
        return tokenizer_from_folder(path)
    with read_gguf(path) as reader:
        return tokenizer_from_gguf(reader)
