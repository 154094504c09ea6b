"""Success rates with their 95% interval (Wilson's score interval, sound for small counts)."""

from __future__ import annotations

import math

Z95 = 1.959964


def wilson(passed: int, total: int, z: float = Z95) -> tuple[float, float]:
    """The 95% interval of a success rate of ``passed`` out of ``total``."""
    if total <= 0:
        return 0.0, 1.0
    p = passed / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
