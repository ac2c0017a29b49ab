"""CPU slots: a few reductions at once, the smallest body first, small bodies in a lane of their own."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.fetch.tool import FetchPageTool
from tests.support.fake_dns import FakeResolver
from tests.support.fetching import fetch_settings
from tests.support.tls import TestCA, serve
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import Settings
from worker.runtime.cpu_slots import EXPRESS_MAX_BYTES, EXPRESS_SLOTS, CpuSlots, Lane

MIB = 1024 * 1024


class Holders:
    """Jobs that take a slot and hold it until told to let go, recording the order they got in."""

    def __init__(self, slots: CpuSlots) -> None:
        self.slots = slots
        self.order: list[str] = []
        self.lanes: dict[str, Lane] = {}
        self._release: dict[str, asyncio.Event] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, name: str, size: int) -> None:
        self._release[name] = asyncio.Event()
        self._tasks[name] = asyncio.create_task(self._hold(name, size))

    async def _hold(self, name: str, size: int) -> None:
        async with self.slots.slot(size) as lane:
            self.order.append(name)
            self.lanes[name] = lane
            await self._release[name].wait()

    async def release(self, name: str) -> None:
        self._release[name].set()
        await self._tasks[name]
        await settle()

    def cancel(self, name: str) -> None:
        self._tasks[name].cancel()

    async def close(self) -> None:
        for event in self._release.values():
            event.set()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.fixture
async def holders() -> AsyncIterator[Holders]:
    h = Holders(CpuSlots(3, express_slots=2))
    try:
        yield h
    finally:
        await h.close()


async def test_no_more_large_bodies_reduce_at_once_than_there_are_general_slots(holders: Holders) -> None:
    for i in range(6):
        holders.start(f"big{i}", 2 * MIB)
    await settle()
    assert holders.order == ["big0", "big1", "big2"]
    assert set(holders.lanes.values()) == {Lane.GENERAL}


async def test_a_small_body_starts_at_once_while_large_ones_hold_every_general_slot(holders: Holders) -> None:
    for i in range(5):
        holders.start(f"big{i}", 2 * MIB)
    await settle()
    holders.start("small", 2_000)
    await settle()
    assert holders.order == ["big0", "big1", "big2", "small"]
    assert holders.lanes["small"] is Lane.EXPRESS


async def test_a_freed_slot_goes_to_the_smallest_body_waiting_not_the_oldest(holders: Holders) -> None:
    for i in range(3):
        holders.start(f"big{i}", 2 * MIB)
    await settle()
    holders.start("older-larger", 2 * MIB)
    holders.start("newer-smaller", MIB)
    holders.start("newest-mid", MIB + 1)
    await settle()
    await holders.release("big0")
    await holders.release("big1")
    assert holders.order[3:] == ["newer-smaller", "newest-mid"]


async def test_the_express_lane_takes_only_small_bodies(holders: Holders) -> None:
    for i in range(3):
        holders.start(f"big{i}", 2 * MIB)
    holders.start("just-too-big", EXPRESS_MAX_BYTES + 1)
    await settle()
    assert "just-too-big" not in holders.order
    assert holders.slots.free(Lane.EXPRESS) == 2


async def test_small_bodies_fill_the_express_lane_then_general_slots_then_wait(holders: Holders) -> None:
    for i in range(6):
        holders.start(f"small{i}", 100)
    await settle()
    lanes = [holders.lanes[name] for name in holders.order]
    assert lanes == [Lane.EXPRESS, Lane.EXPRESS, Lane.GENERAL, Lane.GENERAL, Lane.GENERAL]
    assert holders.slots.waiting == 1


async def test_a_waiter_cancelled_at_its_deadline_leaves_no_slot_taken(holders: Holders) -> None:
    for i in range(3):
        holders.start(f"big{i}", 2 * MIB)
    holders.start("gives-up", 2 * MIB)
    holders.start("stays", 2 * MIB)
    await settle()
    holders.cancel("gives-up")
    await settle()
    await holders.release("big0")
    assert holders.order[3:] == ["stays"]
    assert holders.slots.waiting == 0


async def test_a_slot_granted_in_the_moment_its_waiter_is_cancelled_goes_to_the_next_waiter() -> None:
    slots = CpuSlots(1, express_slots=0)
    holders = Holders(slots)
    holders.start("holder", MIB)
    await settle()
    holders.start("doomed", 10)
    holders.start("next", 20)
    await settle()
    # Release and cancel in the same loop turn: the grant lands on a waiter that is going away.
    holders._release["holder"].set()
    holders.cancel("doomed")
    await settle()
    assert holders.order == ["holder", "next"]
    await holders.close()
    assert slots.free(Lane.GENERAL) == 1


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=4 * MIB), min_size=1, max_size=30),
    general=st.integers(min_value=1, max_value=4),
    express=st.integers(min_value=0, max_value=3),
)
def test_every_waiter_is_served_exactly_once_and_the_slots_all_come_back(
    sizes: list[int], general: int, express: int
) -> None:
    async def scenario() -> None:
        slots = CpuSlots(general, express_slots=express)
        running = 0
        peak = 0
        served: list[int] = []

        async def job(index: int, size: int) -> None:
            nonlocal running, peak
            async with slots.slot(size):
                running += 1
                peak = max(peak, running)
                await asyncio.sleep(0)
                served.append(index)
                running -= 1

        await asyncio.gather(*(job(i, size) for i, size in enumerate(sizes)))
        assert sorted(served) == list(range(len(sizes)))
        assert peak <= general + express
        assert slots.free(Lane.GENERAL) == general and slots.free(Lane.EXPRESS) == express

    asyncio.run(scenario())


async def page(request: web.Request) -> web.Response:
    return web.Response(text="<p>the evidence</p>" * 50, content_type="text/html")


async def test_a_page_that_gets_no_cpu_slot_before_its_deadline_ends_in_timeout_at_the_deadline(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    s = fetch_settings(settings, ca, fetch_timeout_s=1.0, reduce_cpu_budget_s=0.5)
    release = asyncio.Event()

    async def hold(cpu: CpuSlots, size: int) -> None:
        async with cpu.slot(size):
            await release.wait()

    async with serve({"/": page}, ca.server_context()) as server:
        async with (
            running_worker(s, [FetchPageTool(FakeResolver({}))]) as worker,
            ResearchClient(settings=s, job_id_prefix=f"{token}-", wait_s=30) as client,
        ):
            assert worker.runtime is not None
            cpu = worker.runtime.cpu_slots
            # Every general slot and the whole express lane, held by other jobs' reductions.
            sizes = (2 * MIB,) * s.reduce_slots + (100,) * EXPRESS_SLOTS
            holders = [asyncio.create_task(hold(cpu, size)) for size in sizes]
            await settle()
            started = time.monotonic()
            result = await client.fetch(report, server.url("/"))
            took = time.monotonic() - started
            release.set()
            await asyncio.gather(*holders)
    assert result["ok"] is False and result["error"]["kind"] == "timeout", result
    # The wait for a slot counted against the job's own deadline (4 s here), nothing longer.
    assert s.fetch_deadline_s - 0.5 < took < s.fetch_deadline_s + 2


def test_the_fetch_deadline_does_not_grow_with_the_number_of_job_slots() -> None:
    assert Settings(max_jobs=16).fetch_deadline_s == Settings(max_jobs=256).fetch_deadline_s == 28.0
