"""Many request threads share one ConstraintFactory and its grammar cache."""

from __future__ import annotations

import threading

import pytest

from agent.messages import FunctionSpec, ToolSpec
from backends.engine.model.constraint import ConstraintFactory, TokenConstraint


def test_concurrent_callers_share_the_cache_safely() -> None:
    from agent.errors import UserError
    from backends.engine.tokenizer import load_tokenizer
    from backends.gguf.default_model import default_model_path

    try:
        tokenizer = load_tokenizer(default_model_path())
    except UserError as exc:
        pytest.skip(exc.message)
    factory = ConstraintFactory(tokenizer, 49152)
    # More tool sets than the cache holds, so threads evict while others read.
    tool_sets = [
        [ToolSpec(function=FunctionSpec(name=f"tool_{i}", parameters={"type": "object"}))]
        for i in range(40)
    ]
    errors: list[BaseException] = []
    made: list[TokenConstraint | None] = []
    start = threading.Barrier(8)

    def caller(offset: int) -> None:
        start.wait()
        try:
            for i in range(40):
                made.append(factory.for_tools(tool_sets[(offset * 7 + i) % len(tool_sets)]))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors
    assert len(made) == 8 * 40 and all(isinstance(c, TokenConstraint) for c in made)
    assert len(factory._cache) <= 32
