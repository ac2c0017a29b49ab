"""A few child processes per worker that read PDFs, each one PDF at a time under hard limits.

PDFium inflates content streams whole (a 1 MB decompression bomb costs gigabytes), and it is C
code fed hostile bytes. So it never runs in the worker: each PDF goes to a child process
(``jobs.reader.pdf.child``) that holds nothing worth stealing and can open nothing, under a memory
limit, a CPU-time limit (both enforced by the kernel inside the child) and a wall-clock limit
(enforced here). A child that hits a limit or crashes costs its one PDF a clear failure; the next
PDF gets a fresh child.

The pool is loop-agnostic: each exchange runs in one of the pool's own threads (as many as there
are children, so a thread never waits for a child), and the worker's event loop only awaits the
thread. Which PDF goes next is the cost queue's choice (``jobs.reader.pdf.schedule``): the site
whose PDFs have cost the children least lately, never the smallest file. PDFs never hold the
worker's CPU slots, which are for the HTML reductions running in the worker itself, and the
children run at a lower priority (``CHILD_NICENESS``), so a core they share with the worker goes
to the worker's event loop first. It starts lazily with the first PDF and stops at exit; an idle
child also stops by itself when its worker's pipe closes, so none outlives a worker that was killed.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import functools
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum

from jobs.reader.pdf.schedule import CostQueue
from jobs.reader.pdf.wire import (
    REPLY_HEAD,
    Options,
    Reading,
    Refusal,
    Request,
    WireError,
    parse_reply,
    reply_length,
)

# Two cores per machine: more children than that add memory, not throughput.
POOL_SIZE = 2
# The children's niceness: a core shared with the worker goes to the worker's event loop first.
CHILD_NICENESS = 10
# Far above what text extraction of a real 16 MiB PDF needs (the benchmark's peak is printed
# beside it), far below what a bomb asks for.
MEMORY_LIMIT_BYTES = 512 * 1024 * 1024
# A child is retired after this many PDFs, so a slow leak inside PDFium cannot build up.
DOCUMENTS_PER_CHILD = 200
CHILD_MODULE = "jobs.reader.pdf.child"
EXIT_OUT_OF_MEMORY = 3  # pdf_child's status after a MemoryError
RETIRE_WAIT_S = 1.0
# The least CPU budget a PDF reads with, however late its seat came: enough for a first page.
MIN_BUDGET_S = 0.05
# The CPU time past OCR's budget a child may use before the kernel stops it: one page's worth.
OCR_PAGE_ROOM_S = 10.0
OCR_MARGIN_S = 3.0


class Failure(StrEnum):
    """How a child failed a PDF: which limit it hit, or that it crashed."""

    MEMORY = "memory"
    CPU_TIME = "cpu_time"
    WALL_CLOCK = "wall_clock"
    CRASH = "crash"


class ChildFailed(Exception):
    def __init__(self, failure: Failure, limits: Limits) -> None:
        super().__init__(failure.value)
        self.failure = failure
        self.limits = limits


@dataclass(frozen=True)
class Limits:
    """The bounds on reading one PDF."""

    memory_bytes: int
    cpu_budget_s: float  # the child stops reading pages, and returns what it has, past this
    cpu_limit_s: float  # the kernel stops the child here (one page can run past the budget)
    wall_s: float  # the pool stops the child here, whatever it is doing

    @classmethod
    def for_budget(
        cls,
        cpu_budget_s: float,
        memory_bytes: int = MEMORY_LIMIT_BYTES,
        wall_s: float | None = None,
        ocr_budget_s: float = 0.0,
    ) -> Limits:
        # A page can cost as much again as the budget before the child checks; the wall clock
        # allows for sharing two cores with the worker and the other child. OCR's budget is on
        # top, with one page's bound of room (Tesseract cancels a page at its own deadline).
        cpu_limit_s = 2 * cpu_budget_s + 1 + (ocr_budget_s + OCR_PAGE_ROOM_S if ocr_budget_s else 0.0)
        return cls(memory_bytes, cpu_budget_s, cpu_limit_s, wall_s or 2 * cpu_limit_s + 1)


class Child:
    """One child process and its two pipes."""

    def __init__(self, memory_bytes: int, languages: str = "") -> None:
        self.memory_bytes = memory_bytes
        self.languages = languages  # OCR's languages, its models loaded at start; "" for no OCR
        self.documents = 0
        # No environment (no keys, no Redis address), no descriptor but the pipes, its own
        # session (a terminal's Ctrl-C is for the worker, which then closes the pipes), and
        # isolated mode, so nothing in the environment or the working directory is imported.
        self.process = subprocess.Popen(  # noqa: S603 (our own interpreter and module)
            [sys.executable, "-I", "-m", CHILD_MODULE, str(memory_bytes), str(CHILD_NICENESS), languages],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            # (tesserocr's Tesseract is built without OpenMP: it reads a page on the one thread.)
            env={},
            cwd="/",
            close_fds=True,
            start_new_session=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._requests = self.process.stdin.fileno()
        self._replies = self.process.stdout.fileno()
        os.set_blocking(self._requests, False)
        os.set_blocking(self._replies, False)

    @property
    def pid(self) -> int:
        return self.process.pid

    def exchange(self, request: Request, limits: Limits) -> Reading | Refusal:
        """Send one PDF and wait for its reply, at most ``limits.wall_s``; raise ChildFailed."""
        deadline = time.monotonic() + limits.wall_s
        self._send(request.frame(), deadline, limits)
        length = reply_length(self._receive(REPLY_HEAD.size, deadline, limits))
        return parse_reply(self._receive(length, deadline, limits))

    def _send(self, data: bytes, deadline: float, limits: Limits) -> None:
        view = memoryview(data)
        while view:
            self._wait(deadline, limits, write=True)
            try:
                view = view[os.write(self._requests, view) :]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise self._failure(limits) from None

    def _receive(self, size: int, deadline: float, limits: Limits) -> bytes:
        chunks: list[bytes] = []
        remaining = size
        while remaining:
            self._wait(deadline, limits, write=False)
            try:
                chunk = os.read(self._replies, min(remaining, 1 << 20))
            except BlockingIOError:
                continue
            if not chunk:
                raise self._failure(limits)
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def _wait(self, deadline: float, limits: Limits, *, write: bool) -> None:
        remaining = deadline - time.monotonic()
        if remaining > 0:
            fds = [self._requests] if write else [self._replies]
            ready = select.select([], fds, [], remaining) if write else select.select(fds, [], [], remaining)
            if any(ready):
                return
        self.kill()
        raise ChildFailed(Failure.WALL_CLOCK, limits)

    def _failure(self, limits: Limits) -> ChildFailed:
        """What the child died of, read from how it exited."""
        try:
            status = self.process.wait(RETIRE_WAIT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            return ChildFailed(Failure.CRASH, limits)
        if status == -signal.SIGXCPU:
            return ChildFailed(Failure.CPU_TIME, limits)
        # PDFium aborts when an allocation fails, which under RLIMIT_AS is running out of memory.
        if status in (EXIT_OUT_OF_MEMORY, -signal.SIGABRT):
            return ChildFailed(Failure.MEMORY, limits)
        return ChildFailed(Failure.CRASH, limits)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        self._close_pipes()

    def retire(self) -> None:
        """Close the request pipe, which the child reads as the end of its work; kill it if it lingers."""
        self._close_pipes()
        try:
            self.process.wait(RETIRE_WAIT_S)
        except subprocess.TimeoutExpired:
            self.kill()

    def _close_pipes(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


class PdfPool:
    """At most ``size`` children, each reading one PDF at a time; started lazily, replaced when dead."""

    def __init__(
        self,
        size: int = POOL_SIZE,
        memory_bytes: int = MEMORY_LIMIT_BYTES,
        documents_per_child: int = DOCUMENTS_PER_CHILD,
        wall_s: float | None = None,
    ) -> None:
        self.size = size
        self.memory_bytes = memory_bytes
        self.documents_per_child = documents_per_child
        self.wall_s = wall_s  # None: derived from each read's CPU budget
        self.pid = os.getpid()
        self._executor = ThreadPoolExecutor(size, thread_name_prefix="pdf-reader")
        self._idle: list[Child] = []
        self._busy: set[Child] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CostQueue] = (
            weakref.WeakKeyDictionary()
        )

    async def read(
        self,
        body: bytes,
        *,
        max_chars: int,
        cpu_budget_s: float,
        cost_key: str = "",
        until: float | None = None,
        options: Options = Options(),  # noqa: B008 (frozen)
        languages: str = "",
    ) -> Reading | Refusal:
        """The child's reading of ``body``; raise ChildFailed when it hit a limit or crashed.

        It waits for a child in the pool's cost queue, charged to ``cost_key`` (the site); with
        ``until`` (loop time), a PDF that waited long reads with the time it has left, and OCR
        (``options``, in a child with ``languages`` loaded) with what is left after that.
        """
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = CostQueue(self.size)
        async with queue.seat(cost_key):
            if until is not None:
                cpu_budget_s = max(MIN_BUDGET_S, min(cpu_budget_s, until - loop.time()))
                # OCR stops in time for the worker to render, keep and answer before the deadline.
                left = until - loop.time() - cpu_budget_s - OCR_MARGIN_S
                ocr_s = max(0.0, min(options.ocr_budget_s, left))
                options = dataclasses.replace(options, ocr_budget_s=ocr_s)
            limits = Limits.for_budget(cpu_budget_s, self.memory_bytes, self.wall_s, options.ocr_budget_s)
            request = Request(body, max_chars, limits.cpu_budget_s, limits.cpu_limit_s, options)
            exchange = functools.partial(self._exchange, request, limits, languages)
            return await loop.run_in_executor(self._executor, exchange)

    def children(self) -> list[int]:
        """The pids of the children alive now, idle or busy."""
        with self._lock:
            return [child.pid for child in (*self._idle, *self._busy)]

    def _exchange(self, request: Request, limits: Limits, languages: str) -> Reading | Refusal:
        try:
            child = self._take(languages)
        except OSError:  # no process could be started (out of memory or of process slots)
            raise ChildFailed(Failure.CRASH, limits) from None
        try:
            reply = child.exchange(request, limits)
        except ChildFailed:
            self._drop(child)
            raise
        except (WireError, OSError):
            # A reply that is not what pdf_child writes: the child is not to be trusted again.
            self._drop(child)
            raise ChildFailed(Failure.CRASH, limits) from None
        except BaseException:
            self._drop(child)
            raise
        self._give_back(child)
        return reply

    def _take(self, languages: str) -> Child:
        with self._lock:
            if self._closed:
                raise RuntimeError("the PDF pool is closed")
            child = self._idle.pop() if self._idle else None
        if child is not None and child.languages != languages:
            child.retire()  # OCR's languages changed (a test, a reconfigured worker): a fresh child
            child = None
        if child is None or child.process.poll() is not None:
            if child is not None:
                child.kill()
            child = Child(self.memory_bytes, languages)
        with self._lock:
            self._busy.add(child)
        return child

    def _give_back(self, child: Child) -> None:
        child.documents += 1
        with self._lock:
            self._busy.discard(child)
            keep = not self._closed and child.documents < self.documents_per_child
            if keep:
                self._idle.append(child)
        if not keep:
            child.retire()

    def _drop(self, child: Child) -> None:
        with self._lock:
            self._busy.discard(child)
        child.kill()

    def close(self) -> None:
        """Retire the idle children now; a busy one is retired when its PDF is done."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        self._executor.shutdown(wait=False, cancel_futures=True)
        for child in idle:
            child.retire()


_default: PdfPool | None = None
_default_lock = threading.Lock()


def default_pool() -> PdfPool:
    """The worker process's pool, started with its first PDF (and again in a forked process)."""
    global _default
    with _default_lock:
        if _default is None or _default.pid != os.getpid():
            _default = PdfPool()
        return _default


@atexit.register
def close_default_pool() -> None:
    global _default
    with _default_lock:
        pool, _default = _default, None
    if pool is not None and pool.pid == os.getpid():
        pool.close()
