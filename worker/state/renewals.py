"""Renewing a key's time to live at most once a while, rather than with every write to it.

A key that many writes touch (a cache's bookkeeping, a report's archive index) is given a time to
live longer than it needs by twice the interval, and each worker renews it at most once per
interval: one command a minute instead of one per write. The renewal is claimed as the write that
carries it goes out, so concurrent writes do not all carry one, and given back when that write
fails, so the next write carries it instead.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict

# Keys whose last renewal one worker remembers; one it forgot is only renewed again.
REMEMBERED = 4096


class Renewals:
    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self._at: OrderedDict[str, float] = OrderedDict()  # key -> when claimed (monotonic)

    def due(self, key: str = "") -> bool:
        """Whether the write about to go out should renew ``key``; when it should, it is claimed."""
        now = time.monotonic()
        if now - self._at.get(key, -math.inf) < self.every_s:
            return False
        self._at[key] = now
        self._at.move_to_end(key)
        while len(self._at) > REMEMBERED:
            self._at.popitem(last=False)
        return True

    def failed(self, key: str = "") -> None:
        """The write that carried ``key``'s renewal failed: the next one renews it."""
        self._at.pop(key, None)
