"""What the scheduler hands the model runner for one step, built from a scheduler plan."""

from __future__ import annotations

from dataclasses import dataclass, field

from backends.engine.core.params import SamplingParams
from backends.engine.core.sequence import Sequence


@dataclass(slots=True)
class StepBatch:
    """The new tokens of all scheduled sequences, and the paging data to store and read their KV."""

    seq_ids: list[int]
    input_ids: list[
        int
    ]  # the new tokens of every scheduled sequence, concatenated in seq_ids order
    positions: list[int]  # absolute position of each of those tokens
    query_lens: list[
        int
    ]  # new tokens per sequence this step (1 for a decode; a chunk for a prefill)
    context_lens: list[
        int
    ]  # tokens in the KV cache for each sequence after this step (cached + new)
    block_tables: list[list[int]]  # per sequence, its block ids in order
    slot_mapping: list[int]  # per new token, its cache slot = block_id * block_size + offset
    sample_indices: list[int]  # indices into seq_ids of sequences that need a next token this step
    sampling: list[SamplingParams]  # aligned with sample_indices
    output_counts: list[int]  # aligned with sample_indices: tokens generated so far
    constraints: list[object | None]  # aligned with sample_indices: a TokenConstraint or None
    # aligned with sample_indices: draft tokens fed after the sequence's last token, to verify
    # (empty in batches built without drafts)
    drafts: list[list[int]] = field(default_factory=list)
    # aligned with drafts: the positions in each draft that hold forced text
    draft_forced: list[frozenset[int]] = field(default_factory=list)

    @property
    def has_drafts(self) -> bool:
        return any(self.drafts)

    @property
    def num_tokens(self) -> int:
        return len(self.input_ids)


def build_step_batch(scheduled: list[tuple[Sequence, int]], block_size: int) -> StepBatch:
    """The batch for ``scheduled`` (sequence, new tokens), built before computed counts advance."""
    batch = StepBatch([], [], [], [], [], [], [], [], [], [], [])
    for index, (seq, num_new) in enumerate(scheduled):
        start = seq.num_computed_tokens
        end = start + num_new
        table = seq.block_table
        # A chunk that runs past the last token carries that many of the sequence's drafts.
        drafts = seq.draft_ids[: max(end - seq.num_tokens, 0)]
        batch.seq_ids.append(seq.seq_id)
        batch.input_ids.extend(seq.token_ids[start:end])
        batch.input_ids.extend(drafts)
        batch.positions.extend(range(start, end))
        batch.query_lens.append(num_new)
        batch.context_lens.append(end)
        batch.block_tables.append(list(table))
        batch.slot_mapping.extend(
            table[p // block_size] * block_size + p % block_size for p in range(start, end)
        )
        # The chunk reaches the last token: its logits (and the drafts') give the next token.
        if end >= seq.num_tokens:
            batch.sample_indices.append(index)
            batch.sampling.append(seq.params)
            batch.output_counts.append(seq.num_output_tokens)
            batch.constraints.append(seq.constraint)
            batch.drafts.append(drafts)
            forced = seq.draft_forced
            if forced and len(drafts) < len(seq.draft_ids):  # the chunk cut the draft short
                forced = frozenset(j for j in forced if j < len(drafts))
            batch.draft_forced.append(forced)
    return batch
