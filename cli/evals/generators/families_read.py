"""Generators of the curriculum's reading, counting, arithmetic and searching families, gathered
from one module per kind.

Each family has one canonical gold command (``head -n 1 F``, ``grep -n WORD F``, an ``awk``
or ``python3 -c`` one-liner), so a small model learns one form per kind of question. The
workspaces make lucky guesses fail: the first line differs from the others, the largest number
is not the last line and sorts last only by value, a word occurs twice on some line.
``newest-file`` has no generator: the suite format cannot set modification times, so the file
changed last would be an accident of the order the files are written in.
"""

from __future__ import annotations

from cli.evals.generators.base import Generator
from cli.evals.generators.families_arithmetic import ARITHMETIC_FAMILIES
from cli.evals.generators.families_counting import COUNTING_FAMILIES
from cli.evals.generators.families_reading import READING_FAMILIES
from cli.evals.generators.families_searching import SEARCHING_FAMILIES

READ_FAMILIES: dict[str, Generator] = {
    **READING_FAMILIES,
    **COUNTING_FAMILIES,
    **ARITHMETIC_FAMILIES,
    **SEARCHING_FAMILIES,
}
