"""Splitting replies at the platforms' limits without breaking code blocks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.chunking import split_message


def test_short_text_is_one_chunk_and_long_lines_are_cut() -> None:
    assert split_message("hello", 2000) == ["hello"]
    assert split_message("", 2000) == []
    chunks = split_message("z" * 5000, 2000)
    assert all(len(c) <= 2000 for c in chunks) and "".join(chunks) == "z" * 5000


def test_a_code_block_split_across_chunks_is_closed_and_reopened() -> None:
    code = "\n".join(f"line {i} = {i * i}" for i in range(400))
    text = f"Here it is:\n```python\n{code}\n```\nThat is all."
    chunks = split_message(text, 2000)
    assert len(chunks) > 2
    for chunk in chunks:
        assert len(chunk) <= 2000
        assert chunk.count("```") % 2 == 0, chunk[:80]  # every chunk renders on its own
    assert chunks[1].startswith("```python\n")
    body = "".join(c.removeprefix("```python\n").removesuffix("\n```") for c in chunks)
    assert all(f"line {i} = {i * i}" in body for i in range(400))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(st.text(max_size=300), st.sampled_from(["```", "```sh", "~~~"])), max_size=80
    ),
    st.sampled_from([100, 2000, 4096]),
)
def test_chunks_always_fit(lines: list[str], limit: int) -> None:
    text = "\n".join(lines)
    chunks = split_message(text, limit)
    assert all(len(c) <= limit for c in chunks)
    if "```" not in text and "~~~" not in text:  # nothing added: nothing lost either
        assert "".join("".join(chunks).split()) == "".join(text.split())
