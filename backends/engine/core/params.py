"""How one request wants its tokens sampled and when it stops."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.errors import UserError

# A verification step's cost grows with its drafted tokens while long guesses rarely hold.
MAX_SPECULATIVE_TOKENS = 16


@dataclass(slots=True)
class SamplingParams:
    """Sampling and stopping settings of one request."""

    temperature: float = 1.0  # 0.0 means greedy (argmax)
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1.0 = off
    min_p: float = 0.0  # 0.0 = off
    seed: int | None = None  # per-request seed: same seed + same prompt => same tokens
    max_tokens: int = 256
    stop_token_ids: list[int] = field(default_factory=list)
    stop_strings: list[str] = field(default_factory=list)
    ignore_eos: bool = False
    # Prompt-lookup speculative decoding: draft up to this many tokens per step from the
    # request's own prompt and output, verified in the same forward pass (0 = off).
    num_speculative_tokens: int = 0

    @property
    def greedy(self) -> bool:
        """True when the next token is the argmax."""
        return self.temperature == 0.0

    def check(self) -> None:
        """Raise a :class:`UserError` naming the first setting that is out of range."""
        if self.temperature < 0.0:
            raise UserError(f"temperature must be >= 0 (0 is greedy), got {self.temperature}")
        if self.top_k < 0:
            raise UserError(f"top_k must be >= 0 (0 turns it off), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise UserError(f"top_p must be in (0, 1] (1 turns it off), got {self.top_p}")
        if not 0.0 <= self.min_p <= 1.0:
            raise UserError(f"min_p must be in [0, 1] (0 turns it off), got {self.min_p}")
        if self.max_tokens < 1:
            raise UserError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if not 0 <= self.num_speculative_tokens <= MAX_SPECULATIVE_TOKENS:
            raise UserError(
                f"num_speculative_tokens must be in [0, {MAX_SPECULATIVE_TOKENS}] (0 turns it"
                f" off), got {self.num_speculative_tokens}"
            )
        if any(not s for s in self.stop_strings):
            raise UserError("stop strings must not be empty: remove the empty string from stop")
