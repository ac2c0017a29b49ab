"""One document's CPU budget, spent in slices with the event loop turning between them.

Every step of reading a body (decoding, stripping invisible characters, reducing HTML) works in
pieces of a few milliseconds and calls ``pause`` between them: the work is charged to the budget
(CPU time of this thread, not time spent in other tasks while paused), and once a slice's worth of
wall time has passed the loop gets a turn, so a hostile body cannot stall the worker's other jobs.
A step that can stop early stops when ``exhausted``, with what it has, marked truncated.
"""

from __future__ import annotations

import asyncio
import time

# Work done between two turns of the loop: well under the 20 ms stall the worker tolerates, and
# long enough that the cost of yielding stays small next to the work itself.
SLICE_S = 0.002


class CpuBudget:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.spent = 0.0
        self._since = time.thread_time()
        self._slice_started = time.perf_counter()

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.seconds

    async def pause(self) -> None:
        """Charge the work done since the last pause; yield to the loop once a slice is used up."""
        now = time.thread_time()
        self.spent += now - self._since
        self._since = now
        if time.perf_counter() - self._slice_started >= SLICE_S:
            await asyncio.sleep(0)
            self._since = time.thread_time()
            self._slice_started = time.perf_counter()
