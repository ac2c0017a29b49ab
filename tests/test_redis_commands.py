"""What keeps a fetch job's Redis commands few (issue 23): each cut keeps what it replaced.

The memory reading is reused within its interval and the cache's own size is read inside its store;
a leading fetch's document is kept in the script that ends its page flight; leases are read and
extended in one command and put back when they are another's; time-to-live renewals of shared
bookkeeping go out at most once a minute per worker, and always with the write that creates a key.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis

from worker.archive import index as archive_index
from worker.archive.index import ReportIndex
from worker.config import Settings
from worker.metrics import Metrics
from worker.state import keys, memory
from worker.state.leases import LEASE_MS, Renewals
from worker.state.memory import CacheRoom, Reading, RedisMemory, cache_bound
from worker.state.pages.cache import RENEW_SCRIPT, PageCache
from worker.state.pages.documents import HEAD_BYTES, Kept, KeptDocuments
from worker.state.pages.entry import KeptPage, Page, decode


def page(url: str = "https://example.org/a") -> Page:
    return Page(
        url=url,
        final_url=url,
        status=200,
        content_type="text/html",
        title="A",
        text="text " * 200,
        truncated=False,
        redirects=0,
        bytes_read=1000,
        fetched_at="2026-12-04T08:00:00Z",
        extraction="main",
        links=(),
        hidden_removed=0,
    )


class CountingInfo:
    """A Redis stand-in that answers INFO memory and counts every command it is sent."""

    def __init__(self, used: int, maxmemory: int) -> None:
        self.calls: list[str] = []
        self._info = {"used_memory": used, "maxmemory": maxmemory}

    async def info(self, section: str) -> dict[str, int]:
        self.calls.append(f"info {section}")
        return self._info

    def __getattr__(self, name: str) -> Any:
        async def command(*args: Any, **kwargs: Any) -> None:
            self.calls.append(name)

        return command


async def test_the_memory_reading_is_reused_within_its_interval_and_read_again_when_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memory, "READ_EVERY_S", 3600.0)  # no reading ages out during the test
    redis = CountingInfo(used=10, maxmemory=100)
    readings = RedisMemory(redis)  # type: ignore[arg-type]
    first = await readings.reading()
    assert await readings.reading() is first
    assert redis.calls == ["info memory"]
    readings.stale()
    assert await readings.reading() == Reading(10, 100)
    assert redis.calls == ["info memory", "info memory"]


async def test_the_cache_bound_costs_no_command_beyond_the_memory_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memory, "READ_EVERY_S", 3600.0)
    redis = CountingInfo(used=70, maxmemory=100)
    room = CacheRoom(redis, "q")  # type: ignore[arg-type]
    for _ in range(5):
        bound, free = await room.limits(1000)
        assert (bound, free) == (50, 100 - 20 - 70)
    assert redis.calls == ["info memory"]  # what the cache holds is read by its store script


async def test_the_store_evicts_down_to_the_memory_bound_with_the_size_it_reads_itself(
    settings: Settings, redis: aioredis.Redis, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = PageCache(redis, settings, Metrics())
    index, total = keys.page_index(settings.queue_name), keys.page_bytes(settings.queue_name)
    now_ms = int(time.time() * 1000)
    for n in range(10):  # ten pages of 10,000 bytes each, the first closest to expiry
        entry = keys.page(settings.queue_name, "main", f"{token}-old-{n}")
        await redis.set(entry, b"x" * 10_000, px=600_000)
        await redis.zadd(index, {f"{entry}|10000": now_ms + 60_000 + n})
    await redis.set(total, 100_000)
    reading = Reading(used=850_000, maxmemory=1_000_000)  # 50,000 past the 200,000 headroom

    async def limits(fixed: int) -> tuple[int, int | None]:
        return memory.cache_limits(reading, fixed)

    monkeypatch.setattr(cache._room, "limits", limits)
    entry = keys.page(settings.queue_name, "main", f"{token}-new")
    lease = keys.page_flight(settings.queue_name, "main", f"{token}-new")
    await redis.set(lease, "tok", px=LEASE_MS)
    await cache._publish(entry, lease, "tok", page(), 600_000)
    size = len(await redis.get(entry) or b"")
    # The cache comes down to what cache_bound allows for what it held (50,000 bytes), dropping the
    # pages closest to expiry, and keeps the new one.
    assert cache_bound(reading, 100_000, 10**9) == 50_000
    assert int(await redis.get(total) or 0) <= 50_000
    assert size > 0 and await redis.zscore(index, f"{entry}|{size}") is not None
    assert not await redis.exists(keys.page(settings.queue_name, "main", f"{token}-old-0"))
    assert await redis.exists(keys.page(settings.queue_name, "main", f"{token}-old-9"))
    assert not await redis.exists(lease)


async def test_a_flight_renewal_keeps_the_joiners_marks_and_leaves_another_jobs_lease(
    redis: aioredis.Redis, token: str
) -> None:
    renew = redis.register_script(RENEW_SCRIPT)
    lease = f"research-test:{token}:lease"
    await redis.set(lease, "tok++", px=500)
    assert await renew(keys=[lease], args=["tok", LEASE_MS]) == 1
    assert await redis.get(lease) == b"tok++"
    assert await redis.pttl(lease) > 500
    await redis.set(lease, "other+", px=500)
    assert await renew(keys=[lease], args=["tok", LEASE_MS]) == 0
    assert await redis.get(lease) == b"other+"
    await redis.delete(lease)
    assert await renew(keys=[lease], args=["tok", LEASE_MS]) == 0
    assert not await redis.exists(lease)  # a lapsed lease is not brought back by its old holder


async def test_a_flight_that_ends_after_another_job_took_it_leaves_that_lease_and_tells_its_waiters(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    cache = PageCache(redis, settings, Metrics())
    entry = keys.page(settings.queue_name, "main", f"{token}-p")
    lease = keys.page_flight(settings.queue_name, "main", f"{token}-p")
    await redis.set(lease, "theirs", px=LEASE_MS)
    await cache._publish(entry, lease, "mine", page(), 0)
    assert await redis.get(lease) == b"theirs"
    assert 0 < await redis.pttl(lease) <= LEASE_MS
    assert await redis.llen(keys.page_flight_done(settings.queue_name, "mine")) == 1
    await redis.set(lease, "mine", px=LEASE_MS)
    await cache._publish(entry, lease, "mine", page(), 0)
    assert not await redis.exists(lease)


async def test_a_leading_fetchs_document_is_kept_by_the_flights_end_counted_and_noted(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    report = f"r-{token}"
    documents = KeptDocuments(redis, ttl_s=3600, queue_name=settings.queue_name)
    cache = PageCache(redis, settings, Metrics())
    fetched = page(f"https://example.org/{token}")
    keeping = await documents.prepare(
        fetched, {"markdown": "word " * 5000}, {}, noted_for=(report, "main", fetched.url)
    )
    entry = keys.page(settings.queue_name, "main", f"{token}-d")
    lease = keys.page_flight(settings.queue_name, "main", f"{token}-d")
    await redis.set(lease, "tok", px=LEASE_MS)
    await cache._publish(entry, lease, "tok", fetched, 600_000, keeping)
    text = await redis.get(keys.document(keeping.digest))
    assert text is not None and len(text) == keeping.nbytes
    assert int(await redis.get(keys.document_bytes(settings.queue_name)) or 0) == keeping.nbytes
    member = f"{keys.document(keeping.digest)}|{keeping.nbytes}"
    assert await redis.zscore(keys.document_index(settings.queue_name), member) is not None
    note = keys.document_note(report, "main", fetched.url)
    assert await redis.get(note) == keeping.digest.encode()
    for key in (keys.document(keeping.digest), note):
        assert 0 < await redis.pttl(key) <= 3600 * 1000
    for key in (keys.document_index(settings.queue_name), keys.document_bytes(settings.queue_name)):
        assert await redis.pttl(key) > 3600 * 1000  # the bookkeeping outlives every document
    kept = await documents.lookup(report, "main", fetched.url)
    assert isinstance(kept, Kept) and kept.digest == keeping.digest
    assert await redis.get(entry) is not None and not await redis.exists(lease)


async def test_a_document_kept_at_the_flights_end_gives_way_to_redis_headroom_in_that_step(
    settings: Settings, redis: aioredis.Redis, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The documents hold the cached pages' text: like the cache's whole entries, they come down to
    # what Redis's headroom allows as one is kept, the documents closest to expiry first.
    index, total = keys.document_index(settings.queue_name), keys.document_bytes(settings.queue_name)
    now_ms = int(time.time() * 1000)
    for n in range(10):  # ten documents of 10,000 bytes each, the first closest to expiry
        document = keys.document(f"{token}-old-{n}")
        await redis.set(document, b"x" * 10_000, px=600_000)
        await redis.zadd(index, {f"{document}|10000": now_ms + 60_000 + n})
    await redis.set(total, 100_000)
    reading = Reading(used=850_000, maxmemory=1_000_000)  # 50,000 past the 200,000 headroom

    async def limits(fixed: int) -> tuple[int, int | None]:
        return memory.cache_limits(reading, fixed)

    documents = KeptDocuments(redis, ttl_s=3600, queue_name=settings.queue_name)
    cache = PageCache(redis, settings, Metrics(), documents=documents)
    monkeypatch.setattr(cache._room, "limits", limits)
    fetched = page(f"https://example.org/{token}")
    keeping = await documents.prepare(
        fetched, {"markdown": "word " * 500}, {}, noted_for=(f"r-{token}", "main", fetched.url)
    )
    entry = keys.page(settings.queue_name, "main", f"{token}-d")
    lease = keys.page_flight(settings.queue_name, "main", f"{token}-d")
    await redis.set(lease, "tok", px=LEASE_MS)
    await cache._publish(entry, lease, "tok", fetched, 600_000, keeping)
    assert keeping.nbytes < 10_000
    assert int(await redis.get(total) or 0) <= 50_000  # what it held (100,000) less the 50,000 past
    assert await redis.exists(keys.document(keeping.digest))
    assert not await redis.exists(keys.document(f"{token}-old-0"))
    assert await redis.exists(keys.document(f"{token}-old-9"))
    assert isinstance(decode(await redis.get(entry) or b""), KeptPage)


async def test_a_document_past_the_bound_is_not_kept_and_leaves_the_count_as_it_was(
    settings: Settings, redis: aioredis.Redis, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from worker.state.pages import documents as documents_module

    monkeypatch.setattr(documents_module, "MAX_DOCUMENT_BYTES", 10)
    documents = KeptDocuments(redis, ttl_s=3600, queue_name=settings.queue_name)
    fetched = page(f"https://example.org/{token}")
    keeping = await documents.prepare(
        fetched, {"markdown": "word " * 100}, {}, noted_for=(f"r-{token}", "main", fetched.url)
    )
    await redis.set(keys.document_bytes(settings.queue_name), 0)
    assert await keeping.keep() is False
    assert not await redis.exists(keys.document(keeping.digest))
    assert int(await redis.get(keys.document_bytes(settings.queue_name)) or 0) == 0
    assert await redis.zcard(keys.document_index(settings.queue_name)) == 0


async def test_a_report_index_renews_its_ttl_once_a_minute_and_always_when_it_starts_the_list(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    report = f"r-{token}"
    index = ReportIndex(redis, window_s=3600)
    key = keys.archive_report(report)
    await index.add(report, "urn:uuid:1")
    assert await redis.ttl(key) > 3600  # the window, and more: renewals come a minute apart
    await redis.persist(key)
    await index.add(report, "urn:uuid:2")
    assert await redis.ttl(key) == -1  # renewed a moment ago by this worker: not again yet
    await redis.delete(key)
    await index.add(report, "urn:uuid:3")
    assert await redis.ttl(key) > 3600  # a new list always gets its time to live
    assert await redis.lrange(key, 0, -1) == [b"urn:uuid:3"]


async def test_a_report_index_stops_growing_at_its_bound(
    settings: Settings, redis: aioredis.Redis, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archive_index, "MAX_ENTRIES", 3)
    report = f"r-{token}"
    index = ReportIndex(redis, window_s=3600)
    for n in range(5):
        await index.add(report, f"urn:uuid:{n}")
    assert await redis.lrange(keys.archive_report(report), 0, -1) == [
        b"urn:uuid:0",
        b"urn:uuid:1",
        b"urn:uuid:2",
    ]


def test_a_renewal_is_claimed_once_per_interval_and_given_back_when_its_write_fails() -> None:
    renewals = Renewals(3600.0)
    assert renewals.due("a") is True
    assert renewals.due("a") is False  # a concurrent write does not carry it too
    assert renewals.due("b") is True  # each key on its own
    renewals.failed("a")
    assert renewals.due("a") is True


async def test_concurrent_keeps_carry_one_bookkeeping_renewal(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    documents = KeptDocuments(redis, ttl_s=3600, queue_name=settings.queue_name)
    prepared = await asyncio.gather(
        *(
            documents.prepare(
                page(f"https://example.org/{token}/{n}"),
                {"markdown": f"text {n}"},
                {},
                noted_for=(f"r-{token}", "main", f"https://example.org/{token}/{n}"),
            )
            for n in range(8)
        )
    )
    assert [keeping.args[-1] for keeping in prepared].count(1) == 1


async def test_a_document_whose_record_outgrows_the_head_is_read_whole_and_paged_from_its_text(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    documents = KeptDocuments(redis, ttl_s=3600, queue_name=settings.queue_name)
    links = tuple(f"https://example.org/{token}/{'x' * 80}/{n}" for n in range(500))
    fetched = replace(page(f"https://example.org/{token}"), links=links)
    text = "".join(f"word{n} " for n in range(30_000))
    keeping = await documents.prepare(
        fetched, {"markdown": text}, {}, noted_for=(f"r-{token}", "main", fetched.url)
    )
    assert await keeping.keep() is True
    kept = await documents.lookup_digest(keeping.digest)
    assert isinstance(kept, Kept)
    assert kept.base > HEAD_BYTES and kept.page.links == links  # the record took a second read
    assert await documents.text(kept, "markdown", 70_000, 70_100) == text[70_000:70_100]
    await redis.delete(keys.document(keeping.digest))
    assert await documents.lookup_digest(keeping.digest) is None
