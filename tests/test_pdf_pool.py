"""The PDF children: what they hold, the limits that stop them, and their replacement."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jobs.reader.pdf.pool import MEMORY_LIMIT_BYTES, ChildFailed, Failure, Limits, PdfPool, default_pool
from jobs.reader.pdf.wire import Reading
from tests.support.pdfs import bomb_pdf, busy_pdf, text_pdf

ROOT = Path(__file__).resolve().parents[1]
SMALL = text_pdf("A small PDF.")


@pytest.fixture
async def pool() -> AsyncIterator[PdfPool]:
    pool = PdfPool(size=1)
    try:
        yield pool
    finally:
        pool.close()


async def read(pool: PdfPool, body: bytes = SMALL, cpu_budget_s: float = 3.0) -> Reading:
    reply = await pool.read(body, max_chars=40_000, cpu_budget_s=cpu_budget_s)
    assert isinstance(reply, Reading)
    return reply


def gone(pid: int) -> bool:
    """The process has exited (a zombie waiting for its parent counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.02)
    return False


def limits_of(pid: int) -> dict[str, str]:
    rows = Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]
    return {row[:26].strip(): row[26:47].strip() for row in rows}


async def test_a_child_holds_no_environment_no_descriptor_but_its_pipes_and_runs_under_its_limits(
    pool: PdfPool,
) -> None:
    await read(pool)
    (pid,) = pool.children()
    assert Path(f"/proc/{pid}/environ").read_bytes() == b""
    descriptors = sorted(os.listdir(f"/proc/{pid}/fd"))
    assert descriptors == ["0", "1", "2"]
    assert os.readlink(f"/proc/{pid}/fd/0").startswith("pipe:")
    assert os.readlink(f"/proc/{pid}/fd/1").startswith("pipe:")
    assert os.readlink(f"/proc/{pid}/fd/2") == "/dev/null"
    limits = limits_of(pid)
    assert limits["Max address space"] == str(MEMORY_LIMIT_BYTES)
    assert limits["Max open files"] == "3"
    assert limits["Max file size"] == "0"
    assert limits["Max core file size"] == "0"
    assert limits["Max processes"] == "0"
    assert limits["Max cpu time"] != "unlimited"  # set before each document


def test_a_confined_child_can_open_no_socket_and_no_file() -> None:
    probe = textwrap.dedent(
        """
        import socket, sys
        from jobs.reader.pdf.child import confine
        confine(256 * 1024 * 1024)
        refused = []
        for attempt in (socket.socket, lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM),
                        lambda: open("/etc/hostname", "rb"), lambda: open("/tmp/pdf-child-probe", "wb")):
            try:
                attempt()
            except OSError:
                refused.append(True)
            else:
                refused.append(False)
        sys.__stdout__.write(repr(refused))
        """
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, cwd=ROOT, env={}, timeout=30
    )
    assert done.stdout == "[True, True, True, True]", done.stderr


async def test_a_decompression_bomb_hits_the_memory_limit_and_the_next_pdf_gets_a_fresh_child(
    pool: PdfPool,
) -> None:
    await read(pool)
    (first,) = pool.children()
    with pytest.raises(ChildFailed) as failed:
        await read(pool, bomb_pdf(inflated_mib=2000))
    assert failed.value.failure is Failure.MEMORY
    assert wait_gone(first)
    assert (await read(pool)).texts == ["A small PDF."]
    assert pool.children() != [first]


async def test_a_runaway_page_hits_the_cpu_time_limit() -> None:
    # 5 to 10 s of CPU on one page against a limit of 2 x 0.2 + 1 = 1.4 s (the kernel counts whole
    # seconds, so at most 2.4). The memory and wall-clock limits are raised so that neither is what
    # stops the page, even on a machine busy with other work.
    pool = PdfPool(size=1, memory_bytes=2 * 1024**3, wall_s=60)
    try:
        with pytest.raises(ChildFailed) as failed:
            await read(pool, busy_pdf(pages=1, mib=400), cpu_budget_s=0.2)
        assert failed.value.failure is Failure.CPU_TIME
        assert failed.value.limits.cpu_limit_s == pytest.approx(1.4)
        assert (await read(pool)).texts == ["A small PDF."]
    finally:
        pool.close()


async def test_a_child_that_stops_answering_is_killed_at_the_wall_clock_limit(pool: PdfPool) -> None:
    await read(pool)
    (pid,) = pool.children()
    os.kill(pid, signal.SIGSTOP)
    started = time.monotonic()
    with pytest.raises(ChildFailed) as failed:
        await read(pool, cpu_budget_s=0.1)
    elapsed = time.monotonic() - started
    assert failed.value.failure is Failure.WALL_CLOCK
    wall = Limits.for_budget(0.1).wall_s
    assert wall <= elapsed < wall + 2
    assert gone(pid)


async def test_a_child_killed_in_the_middle_of_a_pdf_costs_that_pdf_a_crash_and_no_more(
    pool: PdfPool,
) -> None:
    await read(pool)
    (pid,) = pool.children()
    os.kill(pid, signal.SIGSTOP)  # it will not read: the request (over 64 KiB) fills the pipe
    reading = asyncio.create_task(read(pool, text_pdf("x" * 100) + b"%" * 200_000))
    await asyncio.sleep(0.3)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(ChildFailed) as failed:
        await reading
    assert failed.value.failure is Failure.CRASH
    assert (await read(pool)).texts == ["A small PDF."]


async def test_a_child_that_died_while_idle_is_replaced_without_failing_the_next_pdf(pool: PdfPool) -> None:
    await read(pool)
    (pid,) = pool.children()
    os.kill(pid, signal.SIGKILL)
    assert wait_gone(pid)
    assert (await read(pool)).texts == ["A small PDF."]
    assert pool.children() != [pid]


async def test_the_event_loop_keeps_turning_while_a_child_inflates_a_bomb(pool: PdfPool) -> None:
    gaps: list[float] = []

    async def tick() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    try:
        with pytest.raises(ChildFailed):
            await read(pool, bomb_pdf(inflated_mib=2000))
    finally:
        ticker.cancel()
    # Inflating the bomb takes the child a second or more; the loop never waits a quarter of that.
    assert len(gaps) > 20
    assert max(gaps) < 0.25


async def test_no_more_children_read_at_once_than_the_pool_has() -> None:
    pool = PdfPool(size=2)
    seen: list[int] = []

    async def watch() -> None:
        while True:
            seen.append(len(pool.children()))
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    try:
        body = busy_pdf(pages=1, mib=8)
        readings = await asyncio.gather(*(read(pool, body) for _ in range(6)))
    finally:
        watcher.cancel()
        pool.close()
    assert all(reading.texts == ["Busy page 1."] for reading in readings)
    assert max(seen) == 2


async def test_a_child_is_retired_after_its_quota_of_pdfs() -> None:
    pool = PdfPool(size=1, documents_per_child=2)
    try:
        await read(pool)
        (first,) = pool.children()
        await read(pool)
        assert pool.children() == []
        assert wait_gone(first)
        await read(pool)
        assert pool.children() not in ([], [first])
    finally:
        pool.close()


async def test_closing_the_pool_ends_its_children() -> None:
    pool = PdfPool(size=1)
    await read(pool)
    (pid,) = pool.children()
    pool.close()
    assert wait_gone(pid)
    with pytest.raises(RuntimeError):
        await read(pool)


def test_an_idle_child_ends_when_its_worker_is_killed() -> None:
    script = textwrap.dedent(
        """
        import asyncio, os, signal, sys
        from jobs.reader.pdf.pool import PdfPool
        pool = PdfPool(size=1)
        body = open(sys.argv[1], "rb").read()
        asyncio.run(pool.read(body, max_chars=100, cpu_budget_s=1.0))
        print(pool.children()[0], flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    path = Path(f"/tmp/pdf-pool-{os.getpid()}.pdf")
    path.write_bytes(SMALL)
    try:
        done = subprocess.run(
            [sys.executable, "-c", script, str(path)], capture_output=True, text=True, cwd=ROOT, timeout=30
        )
    finally:
        path.unlink()
    assert done.returncode == -signal.SIGKILL
    assert wait_gone(int(done.stdout))


def test_the_worker_process_has_one_default_pool() -> None:
    assert default_pool() is default_pool()
