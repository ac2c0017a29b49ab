"""What a job spends its time on, phase by phase: measured always, shown on the dashboard's job page
and, when tracing is on, sent as child spans of the job's span.

A job opens a ``PhaseLog`` for its task (``open_log``); code anywhere below it marks a phase with
``phase(NAME)`` or ``record(NAME, start_ns, end_ns)``, and a mark outside a job is dropped. Tasks a
job starts inherit the log (context variables are copied into new tasks), so a fetch's network
phases land in the job that asked for them. A phase costs two clock reads and a list append.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

QUEUE_WAIT = "queue wait"
MENU_AND_BUDGET = "menu and budget"
DNS_AND_GUARDIAN = "dns and guardian"
CONNECT = "connect"
TLS = "tls"
FIRST_BYTE = "first byte"
BODY = "body"
REDUCE = "reduce"
OCR = "ocr"
RENDER = "render"
ARCHIVE = "archive"
SEARCH_PROVIDER = "search provider"

PHASES = (
    QUEUE_WAIT,
    MENU_AND_BUDGET,
    DNS_AND_GUARDIAN,
    CONNECT,
    TLS,
    FIRST_BYTE,
    BODY,
    REDUCE,
    OCR,
    RENDER,
    ARCHIVE,
    SEARCH_PROVIDER,
)
# A job that loops (many redirects, many pages OCR'd) keeps its first phases; the rest are counted.
MAX_PHASES = 64


@dataclass(frozen=True)
class Phase:
    name: str
    start_ns: int  # wall clock (time.time_ns), as spans carry it
    end_ns: int

    @property
    def duration_ms(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e6


@dataclass
class PhaseLog:
    """One job's phases, in the order they ended."""

    phases: list[Phase] = field(default_factory=list)
    dropped: int = 0
    # Instants a later mark measures from (a connection's start, a request's headers sent).
    marks: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, start_ns: int, end_ns: int) -> None:
        if len(self.phases) >= MAX_PHASES:
            self.dropped += 1
            return
        self.phases.append(Phase(name, start_ns, max(start_ns, end_ns)))

    def summary(self, origin_ns: int) -> list[list[str | float]]:
        """``[name, start, duration]`` per phase in milliseconds from ``origin_ns``: the dashboard's
        view, small enough to keep beside the job's line."""
        return [
            [p.name, round((p.start_ns - origin_ns) / 1e6, 1), round(p.duration_ms, 1)] for p in self.phases
        ]


_LOG: contextvars.ContextVar[PhaseLog | None] = contextvars.ContextVar("phase_log", default=None)


def open_log() -> tuple[PhaseLog, contextvars.Token[PhaseLog | None]]:
    """Start measuring the current task's job; ``close_log(token)`` when it ends."""
    log = PhaseLog()
    return log, _LOG.set(log)


def close_log(token: contextvars.Token[PhaseLog | None]) -> None:
    _LOG.reset(token)


def current() -> PhaseLog | None:
    return _LOG.get()


def now_ns() -> int:
    return time.time_ns()


def record(name: str, start_ns: int, end_ns: int | None = None) -> None:
    """Note a phase measured elsewhere (a hook that saw its start and end)."""
    log = _LOG.get()
    if log is not None:
        log.add(name, start_ns, time.time_ns() if end_ns is None else end_ns)


def mark(key: str) -> None:
    """Note an instant a later ``record_since`` measures from."""
    log = _LOG.get()
    if log is not None:
        log.marks[key] = time.time_ns()


def record_since(name: str, key: str) -> None:
    """Note the phase from the instant ``mark(key)`` noted to now, and forget the mark."""
    log = _LOG.get()
    if log is not None and (start := log.marks.pop(key, None)) is not None:
        log.add(name, start, time.time_ns())


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Measure the block as phase ``name`` of the current job (nothing outside a job)."""
    log = _LOG.get()
    if log is None:
        yield
        return
    start = time.time_ns()
    try:
        yield
    finally:
        log.add(name, start, time.time_ns())
