"""Repeated alerts, rate-limited per run and title: a run whose loss is NaN at every step, or a
`watch` polling every few seconds, must not flood a chat channel.

The clock is injectable, so tests move time instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

DEFAULT_INTERVAL = 60.0  # seconds between two alerts of the same run and title


class RateLimiter:
    """Lets an alert of a key through when none was let through in the last `interval` seconds;
    counts the ones held back, so the next one let through can say how many there were."""

    def __init__(
        self, interval: float = DEFAULT_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not interval >= 0:
            raise ValueError(f"interval must be 0 or more seconds, got {interval!r}")
        self.interval = interval
        self.clock = clock
        self._last: dict[object, float] = {}
        self._held: dict[object, int] = {}
        self._lock = threading.Lock()

    def admit(self, key: object, interval: float | None = None) -> int | None:
        """None when an alert of `key` is held back now; else how many were held back since the
        last one let through (0 mostly). `interval` overrides the limiter's for this alert."""
        wait = self.interval if interval is None else interval
        with self._lock:
            now = self.clock()
            last = self._last.get(key)
            if last is not None and now - last < wait:
                self._held[key] = self._held.get(key, 0) + 1
                return None
            self._last[key] = now
            return self._held.pop(key, 0)
