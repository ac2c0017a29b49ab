"""Claims are leases: renewed while the job runs, lapsing within seconds when the worker is gone, and
finished only by the worker that holds them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import redis.asyncio as aioredis
from arq.constants import in_progress_key_prefix, job_key_prefix, result_key_prefix, retry_key_prefix
from hypothesis import given
from hypothesis import strategies as st

from tests.support.results import ok_result
from tests.support.tools import TEST_TOOLS
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import Settings
from worker.runtime.claims import JobLeases, parse_lease
from worker.serialization import loads
from worker.state import keys
from worker.state.queue import Finish
from worker.state.results import ResultStore, Written

SHORT_LEASE_MS = 600


async def wait_charged(redis: aioredis.Redis, report: str) -> None:
    """The slow tool charges first, then sleeps: a charge means its body is running."""
    deadline = time.monotonic() + 10
    while not await redis.hget(keys.budget(report), "fetch"):
        assert time.monotonic() < deadline, "the job never started"
        await asyncio.sleep(0.02)


async def test_a_running_jobs_lease_is_renewed_past_its_length_and_names_its_worker(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    async with (
        running_worker(settings, TEST_TOOLS, lease_ms=SHORT_LEASE_MS),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client,
    ):
        job_id = await client.enqueue("slow", {"report_id": report, "seconds": 2.0})
        await wait_charged(redis, report)
        await asyncio.sleep(3 * SHORT_LEASE_MS / 1000)
        lease = parse_lease(await redis.get(in_progress_key_prefix + job_id))
        ttl_ms = await redis.pttl(in_progress_key_prefix + job_id)
        result = await client.wait(job_id)
    assert lease is not None and lease.worker_id == settings.worker_id
    assert 0 < ttl_ms <= SHORT_LEASE_MS
    assert result["ok"] is True
    assert await redis.get(retry_key_prefix + job_id) is None  # finished on its first try


async def test_a_dead_workers_job_runs_again_once_its_lease_lapses_not_after_the_job_timeout(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    async with ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client:
        job_id = await client.enqueue("echo", {"report_id": report, "value": "again"})
        # A worker claimed it, started it (arq counted the try) and died: its lease runs out alone.
        await redis.set(in_progress_key_prefix + job_id, f"dead-{token}/0@1", px=SHORT_LEASE_MS)
        await redis.set(retry_key_prefix + job_id, 1)
        started = time.monotonic()
        async with running_worker(settings, TEST_TOOLS, lease_ms=SHORT_LEASE_MS, poll_delay_s=0.1):
            result = await client.wait(job_id)
        took = time.monotonic() - started
    assert result["ok"] is True and result["job_try"] == 2
    assert SHORT_LEASE_MS / 1000 * 0.5 < took < settings.job_timeout_s / 4


async def test_a_worker_that_lost_its_lease_stops_its_run_and_leaves_the_job_to_the_holder(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    async with (
        running_worker(settings, TEST_TOOLS, lease_ms=SHORT_LEASE_MS, poll_delay_s=0.1) as worker,
        ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client,
    ):
        job_id = await client.enqueue("slow", {"report_id": report, "seconds": 2.0})
        await wait_charged(redis, report)
        # Another worker took the job while this one was stalled (as after a SIGSTOP).
        other = f"other-{token}/1@{int(time.time() * 1000)}"
        await redis.set(in_progress_key_prefix + job_id, other, px=60_000)
        deadline = time.monotonic() + 5
        while job_id in worker.job_tasks:
            assert time.monotonic() < deadline, "the run went on without its lease"
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # arq's finish has run by now, if it was going to
        assert await redis.get(keys.result(job_id)) is None
        assert await redis.get(in_progress_key_prefix + job_id) == other.encode()
        assert await redis.zscore(settings.queue_name, job_id) is not None
        assert await redis.exists(job_key_prefix + job_id)
        # The other worker "dies" too: its lease goes, and this worker runs the job to its end.
        await redis.delete(in_progress_key_prefix + job_id)
        result = await client.wait(job_id)
    assert result["ok"] is True
    assert await redis.hget(keys.budget(report), "fetch") == b"1"


async def test_a_finish_by_a_worker_that_no_longer_holds_the_job_changes_nothing(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    leases = JobLeases(redis, settings.queue_name, f"w-{token}")
    job_id = f"{token}-held-elsewhere"
    holder = f"other-{token}/2@5"
    await redis.set(in_progress_key_prefix + job_id, holder)
    await redis.set(job_key_prefix + job_id, b"payload")
    await redis.zadd(settings.queue_name, {job_id: 1})
    for finish in (True, False):
        done = await leases.finish(
            job_id, finish=finish, arq_result=b"late", result_ttl_ms=60_000, requeue_score=5
        )
        assert done is False
    assert await redis.get(in_progress_key_prefix + job_id) == holder.encode()
    assert await redis.get(job_key_prefix + job_id) == b"payload"
    assert await redis.zscore(settings.queue_name, job_id) == 1
    assert not await redis.exists(result_key_prefix + job_id)


async def test_a_late_finish_of_a_job_finished_elsewhere_does_not_put_it_back_in_the_queue(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    leases = JobLeases(redis, settings.queue_name, f"w-{token}")
    job_id = f"{token}-finished-elsewhere"
    await redis.set(result_key_prefix + job_id, b"the holder's record")
    done = await leases.finish(job_id, finish=False, arq_result=None, result_ttl_ms=60_000, requeue_score=5)
    assert done is False
    assert await redis.zscore(settings.queue_name, job_id) is None
    done = await leases.finish(job_id, finish=True, arq_result=b"late", result_ttl_ms=60_000)
    assert done is False
    assert await redis.get(result_key_prefix + job_id) == b"the holder's record"


async def test_the_holders_finish_does_arqs_bookkeeping(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    leases = JobLeases(redis, settings.queue_name, f"w-{token}")
    job_id = f"{token}-mine"
    await redis.set(in_progress_key_prefix + job_id, leases.value(1))
    await redis.set(job_key_prefix + job_id, b"payload")
    await redis.set(retry_key_prefix + job_id, 1)
    await redis.zadd(settings.queue_name, {job_id: 1})
    assert await leases.finish(job_id, finish=True, arq_result=b"record", result_ttl_ms=60_000)
    for prefix in (in_progress_key_prefix, job_key_prefix, retry_key_prefix):
        assert not await redis.exists(prefix + job_id)
    assert await redis.zscore(settings.queue_name, job_id) is None
    assert await redis.get(result_key_prefix + job_id) == b"record"
    assert 0 < await redis.pttl(result_key_prefix + job_id) <= 60_000


async def test_renewal_reports_a_lease_another_worker_took_and_takes_back_one_nobody_took(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    clock = FakeClock()
    leases = JobLeases(redis, settings.queue_name, f"w-{token}", lease_ms=5_000, clock=clock)
    taken, lapsed, done = (f"{token}-taken", f"{token}-lapsed", f"{token}-done")
    for job_id in (taken, lapsed, done):
        leases.hold(job_id)
    await redis.set(in_progress_key_prefix + taken, f"other-{token}/3@1")
    await redis.set(keys.result(done), b"{}")  # finished by another worker, key gone with it
    clock.now += leases.renew_every_s  # a beat later: every lease is due for renewal
    lost = await leases.renew()
    assert lost == {taken, done}
    assert leases.held == {lapsed}
    assert parse_lease(await redis.get(in_progress_key_prefix + lapsed)) is not None
    assert 0 < await redis.pttl(in_progress_key_prefix + lapsed) <= 5_000


def test_a_lease_value_reads_back_as_its_worker_and_claim_time() -> None:
    lease = parse_lease(b"host-1-42/abcdef012345@1733130000123")
    assert lease is not None
    assert (lease.worker_id, lease.claimed_ms) == ("host-1-42", 1733130000123)
    assert parse_lease(b"1") is None  # arq's own marker, from a plain arq worker


@given(st.binary(max_size=80) | st.text(max_size=80).map(str.encode))
def test_any_in_progress_value_reads_as_a_lease_or_as_none(value: bytes) -> None:
    lease = parse_lease(value)
    assert lease is None or (lease.claimed_ms >= 0 and isinstance(lease.worker_id, str))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_beat_renews_only_the_leases_a_beat_old(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    clock = FakeClock()
    leases = JobLeases(redis, settings.queue_name, f"w-{token}", lease_ms=5_000, clock=clock)
    old, young = f"{token}-old", f"{token}-young"
    for job_id in (old, young):
        await redis.set(in_progress_key_prefix + job_id, leases.value(1), px=1_000)
    leases.hold(old)
    clock.now += leases.renew_every_s
    leases.hold(young)
    assert await leases.renew() == set()
    assert await redis.pttl(in_progress_key_prefix + old) > 1_000  # renewed to the lease's length
    assert await redis.pttl(in_progress_key_prefix + young) <= 1_000  # too young to need it
    clock.now += leases.renew_every_s / 2
    assert await leases.renew() == set()
    # The old one was renewed just now; the young one is still not a beat old.
    assert await redis.pttl(in_progress_key_prefix + young) <= 1_000
    clock.now += leases.renew_every_s / 2
    assert await leases.renew() == set()
    assert await redis.pttl(in_progress_key_prefix + young) > 1_000


async def test_a_lease_is_as_old_as_the_claim_that_took_it(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    clock = FakeClock()
    leases = JobLeases(redis, settings.queue_name, f"w-{token}", lease_ms=5_000, clock=clock)
    job_id = f"{token}-slow-start"
    await redis.set(in_progress_key_prefix + job_id, leases.value(1), px=1_000)
    leases.hold(job_id, claimed_at=clock.now - leases.renew_every_s)  # claimed a beat before it was held
    assert await leases.renew() == set()
    assert await redis.pttl(in_progress_key_prefix + job_id) > 1_000


async def test_renewal_leaves_another_workers_lease_as_it_was_and_keeps_the_claim_time(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    clock = FakeClock()
    leases = JobLeases(redis, settings.queue_name, f"w-{token}", lease_ms=5_000, clock=clock)
    mine, theirs = f"{token}-mine", f"{token}-theirs"
    await redis.set(in_progress_key_prefix + mine, leases.value(1234), px=1_000)
    await redis.set(in_progress_key_prefix + theirs, f"other-{token}/3@1", px=1_000)
    leases.hold(mine, value=leases.value(1234))
    leases.hold(theirs, value=leases.value(1234))
    clock.now += leases.renew_every_s
    assert await leases.renew() == {theirs}
    assert await redis.get(in_progress_key_prefix + theirs) == f"other-{token}/3@1".encode()
    assert await redis.pttl(in_progress_key_prefix + theirs) > 0
    lease = parse_lease(await redis.get(in_progress_key_prefix + mine))
    assert lease is not None and lease.claimed_ms == 1234  # renewing does not move the claim's time
    assert await redis.pttl(in_progress_key_prefix + mine) > 1_000


def ending(settings: Settings, redis: aioredis.Redis, token: str) -> tuple[JobLeases, ResultStore]:
    """A worker's leases and the result store whose writes carry the jobs' finish."""
    return JobLeases(redis, settings.queue_name, f"w-{token}"), ResultStore(
        redis, ttl_s=60, queue_name=settings.queue_name
    )


def with_record(leases: JobLeases, job_id: str) -> Callable[[object], Finish]:
    """The finish a result's write carries: arq's record is b"record"."""
    return lambda _: leases.finishing(job_id, b"record", 60_000)


async def held_job(redis: aioredis.Redis, queue: str, job_id: str, lease: str) -> None:
    await redis.set(in_progress_key_prefix + job_id, lease)
    await redis.set(job_key_prefix + job_id, b"payload")
    await redis.set(retry_key_prefix + job_id, 1)
    await redis.zadd(queue, {job_id: 1})


async def test_the_result_that_stands_carries_its_jobs_finish_in_the_same_write(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    leases, store = ending(settings, redis, token)
    job_id = f"{token}-ends"
    await held_job(redis, settings.queue_name, job_id, leases.value(1))
    result = ok_result("echo", report, job_id, {"echo": "done"})
    written = await store.write(result, 1.0, finish=with_record(leases, job_id))
    assert written == Written(None, True)
    assert await store.read(job_id) == result
    for prefix in (in_progress_key_prefix, job_key_prefix, retry_key_prefix):
        assert not await redis.exists(prefix + job_id)
    assert await redis.zscore(settings.queue_name, job_id) is None
    assert await redis.get(result_key_prefix + job_id) == b"record"


async def test_a_result_written_after_the_lease_went_to_another_worker_leaves_its_job_alone(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    leases, store = ending(settings, redis, token)
    job_id = f"{token}-taken"
    holder = f"other-{token}/2@5"
    await held_job(redis, settings.queue_name, job_id, holder)
    result = ok_result("echo", report, job_id, {"echo": "mine"})
    written = await store.write(result, 1.0, finish=with_record(leases, job_id))
    assert written == Written(None, False)  # first-wins: the result stands; the job is the holder's
    assert await store.read(job_id) == result
    assert await redis.get(in_progress_key_prefix + job_id) == holder.encode()
    assert await redis.get(job_key_prefix + job_id) == b"payload"
    assert await redis.zscore(settings.queue_name, job_id) == 1
    assert not await redis.exists(result_key_prefix + job_id)


async def test_a_write_that_finds_a_result_standing_finishes_nothing(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    # The job is finished by its worker afterwards, with arq's record of the result that stands.
    leases, store = ending(settings, redis, token)
    job_id = f"{token}-stood"
    await held_job(redis, settings.queue_name, job_id, leases.value(1))
    first = ok_result("echo", report, job_id, {"echo": "first"})
    await store.write(first, 1.0)
    second = ok_result("echo", report, job_id, {"echo": "second"})
    written = await store.write(second, 1.0, finish=with_record(leases, job_id))
    assert written == Written(first, None)
    assert await redis.exists(in_progress_key_prefix + job_id, job_key_prefix + job_id) == 2
    assert await redis.zscore(settings.queue_name, job_id) == 1
    assert not await redis.exists(result_key_prefix + job_id)


async def test_a_job_run_by_a_worker_ends_with_its_result_and_arqs_record_and_leaves_nothing_held(
    settings: Settings, token: str, report: str, redis: aioredis.Redis
) -> None:
    async with running_worker(settings, TEST_TOOLS, poll_delay_s=0.05) as worker:
        async with ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client:
            result = await client.call("echo", {"report_id": report, "value": "once"})
        job_id = result["job_id"]
        deadline = time.monotonic() + 5
        while await redis.zscore(settings.queue_name, job_id) is not None:
            assert time.monotonic() < deadline, "the job never left the queue"
            await asyncio.sleep(0.02)
        assert job_id not in worker._leases.held  # released with the finish: never renewed again
    assert result["ok"] is True
    for prefix in (in_progress_key_prefix, job_key_prefix, retry_key_prefix):
        assert not await redis.exists(prefix + job_id)
    record = loads(await redis.get(result_key_prefix + job_id))
    assert record["s"] is True and record["r"]["job_id"] == job_id and "echo" not in record["r"]
