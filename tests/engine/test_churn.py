"""Random add / step / abort / preempt churn: no block is ever leaked and outputs stay exact.

After every operation the block accounting must match the live sequences (reference counts, the
free list, the hash table), and every request that finishes normally must have produced exactly
the tokens the fake model gives without any paging, however often it was preempted or served from
the prefix cache.
"""

from __future__ import annotations

from fake_runner import FakeRunner, reference_generate
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from backends.engine.core.engine_config import EngineConfig
from backends.engine.core.llm_engine import LLMEngine
from backends.engine.core.params import SamplingParams

BLOCK_SIZE = 4
NUM_BLOCKS = 16  # 64 token slots: small enough that preemption and eviction happen all the time
BASES = [[7] * 20, list(range(30, 50)), [1, 2, 3, 4, 5, 6, 7, 8]]  # shared prefixes for cache hits


class EngineChurn(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.runner = FakeRunner(num_blocks=NUM_BLOCKS, block_size=BLOCK_SIZE, eos_every=11)
        self.engine = LLMEngine(
            self.runner, EngineConfig(max_num_seqs=6, max_num_batched_tokens=16)
        )
        self.expected: dict[int, list[int]] = {}
        self.aborted: set[int] = set()
        self.finished = 0

    @rule(
        base=st.sampled_from(BASES),
        cut=st.integers(0, 20),
        tail=st.lists(st.integers(0, 255), max_size=12),
        max_tokens=st.integers(1, 16),
        temperature=st.sampled_from([0.0, 0.7]),
    )
    def add(
        self, base: list[int], cut: int, tail: list[int], max_tokens: int, temperature: float
    ) -> None:
        prompt = (base[:cut] + tail) or [0]
        params = SamplingParams(temperature=temperature, seed=len(prompt), max_tokens=max_tokens)
        request_id = self.engine.add_request(prompt, params)
        self.expected[request_id] = reference_generate(prompt, params, eos_every=11)

    @rule()
    def step(self) -> None:
        for out in self.engine.step():
            if out.result is None:
                continue
            self.finished += 1
            if out.request_id in self.aborted:
                assert out.result.finish_reason == "abort"
            else:
                assert out.result.token_ids == self.expected[out.request_id]
            del self.expected[out.request_id]

    @precondition(lambda self: bool(self.expected))
    @rule(data=st.data())
    def abort(self, data: st.DataObject) -> None:
        request_id = data.draw(st.sampled_from(sorted(self.expected)))
        self.aborted.add(request_id)
        self.engine.abort(request_id)

    @rule()
    def preempt(self) -> None:
        self.engine.scheduler.preempt_newest()

    @invariant()
    def accounting_is_exact(self) -> None:
        self.engine.scheduler.check_invariants()
        bm = self.engine.block_manager
        held = {b for s in self.engine.scheduler.running for b in s.block_table}
        assert bm.num_free_blocks + len(held) == NUM_BLOCKS

    def teardown(self) -> None:
        # Drain: everything still live must finish and leave the pool whole.
        for _ in range(2000):
            if not self.engine.has_unfinished():
                break
            self.step()
        assert not self.expected
        assert self.engine.block_manager.num_free_blocks == NUM_BLOCKS


EngineChurn.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_engine_churn = EngineChurn.TestCase
