"""A token bucket per sender, so one flooding sender cannot starve the others."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float
    warned: bool = False


@dataclass
class RateLimiter:
    """``burst`` messages at once, then ``per_minute`` a minute, per sender."""

    per_minute: float = 20.0
    burst: int = 5
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    def allow(self, sender: str) -> tuple[bool, bool]:
        """(allowed, warn): ``warn`` is True for the first refusal in a row only."""
        now = self.clock()
        bucket = self._buckets.get(sender)
        if bucket is None:
            bucket = self._buckets[sender] = _Bucket(float(self.burst), now)
        bucket.tokens = min(
            float(self.burst), bucket.tokens + (now - bucket.stamp) * self.per_minute / 60.0
        )
        bucket.stamp = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            bucket.warned = False
            return True, False
        warn = not bucket.warned
        bucket.warned = True
        return False, warn
