"""One request as the scheduler sees it: its tokens, how many are in the KV cache, its blocks."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from backends.engine.core.params import SamplingParams


class SequenceStatus(enum.Enum):
    """Where a sequence is: queued, holding blocks, or done."""

    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(slots=True, eq=False)
class Sequence:
    """A prompt and the tokens generated after it, with its paging state.

    ``num_computed_tokens`` counts the tokens whose keys and values are in the cache (prefix hits
    included). Every token past it still has to go through the model; a running sequence that is
    decoding has exactly one such token, the one sampled last step.
    """

    seq_id: int
    token_ids: list[int]
    num_prompt_tokens: int
    params: SamplingParams = field(default_factory=SamplingParams)
    constraint: object | None = None  # a TokenConstraint, opaque here
    status: SequenceStatus = SequenceStatus.WAITING
    num_computed_tokens: int = 0
    num_cached_tokens: int = 0  # prompt tokens served from the prefix cache at first admission
    block_table: list[int] = field(default_factory=list)
    # Chained hashes of this sequence's full blocks, in order; shared with the block manager.
    block_hashes: list[int] = field(default_factory=list)
    num_registered_blocks: int = 0  # leading blocks already offered to the prefix cache
    finish_reason: str | None = None
    num_preemptions: int = 0
    # Guessed next tokens for this step (speculative decoding); they enter ``token_ids`` only
    # once the model has verified them.
    draft_ids: list[int] = field(default_factory=list)
    # Positions in ``draft_ids`` holding text the grammar forces (kept whenever those before are)
    draft_forced: frozenset[int] = frozenset()

    @classmethod
    def new(
        cls,
        seq_id: int,
        prompt_ids: list[int],
        params: SamplingParams,
        constraint: object | None = None,
    ) -> Sequence:
        """A waiting sequence for ``prompt_ids``."""
        return cls(seq_id, list(prompt_ids), len(prompt_ids), params, constraint)

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens."""
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        """Generated tokens so far."""
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def output_ids(self) -> list[int]:
        """The generated tokens."""
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def prompt_ids(self) -> list[int]:
        """The prompt tokens."""
        return self.token_ids[: self.num_prompt_tokens]

    @property
    def num_uncomputed_tokens(self) -> int:
        """Tokens not yet in the KV cache."""
        return len(self.token_ids) - self.num_computed_tokens

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    def cut_draft(self, keep: int) -> None:
        """Keep the first ``keep`` drafted tokens; a forced run is kept whole or not at all (the
        engine appends forced text whole)."""
        while (
            0 < keep < len(self.draft_ids)
            and keep in self.draft_forced
            and keep - 1 in self.draft_forced
        ):
            keep -= 1
        del self.draft_ids[max(keep, 0) :]

    def block_tokens(self, index: int, block_size: int) -> list[int]:
        """The token ids that belong in block ``index`` of this sequence (may be partial)."""
        return self.token_ids[index * block_size : (index + 1) * block_size]
