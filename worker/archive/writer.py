"""The archive writer: records go to storage off the fetch's path, and never cost it anything.

A job hands its capture to ``Archive.fetched`` (a search's answer to ``searched``, a render's
document, DOM and screenshot to ``rendered``) and goes on reducing the page; a few writer tasks
take items from a bounded queue, build the WARC file in a thread and store it. The job asks its
``Receipt`` afterwards, which waits for one Redis round trip only: the record is put in the
report's index (``worker.archive.index``) and in this worker's pending hash
(``worker.archive.journal``), and the result says ``archived: true``. The writer takes the record
out of the hash once the file is stored; a write that fails puts it on the queue's lost list at
once, and a worker killed before writing leaves it in the hash, where the next sweep (any
worker's, or the dashboard's reading) finds and counts it. A clean stop writes every queued
record first. ``archived: false`` is for a record never accepted:

- back-pressure: when the queue holds ``QUEUE_ITEMS`` items or ``QUEUE_BYTES`` bytes, a new record
  is dropped at once (counted ``dropped``, logged once a minute), not waited for;
- a store that failed (refused, full, unreachable) is left alone for ``RETRY_S``: records in that
  time are dropped at once, then the next one tries again;
- Redis did not take the index entry within ``CONFIRM_S``.

Deduplication: a fetch whose final payload (as received) matches a recent one is stored as a WARC
``revisit`` record that refers to the first (``WARC-Refers-To``), so fifty reports citing one page
hold its bytes once. A pointer per payload lives in Redis (``keys.archive_pointer``), named by the
store it refers into, so a shared bucket deduplicates across every worker at the cost of one Redis
round trip rather than two object-store requests; it expires when its original grows too old for
an export to reach (then a new full record is written, and becomes the pointer).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from redis.exceptions import RedisError

from worker.archive import journal
from worker.archive.capture import Capture
from worker.archive.ids import digest_name, file_key, new_record_id, parse_record_id
from worker.archive.index import ReportIndex
from worker.archive.masking import SecretMask, masked, masked_search
from worker.archive.records import (
    Original,
    Stamp,
    fetch_file,
    payload_digest,
    rendered_file,
    screenshot_file,
    search_file,
    warc_date,
)
from worker.archive.store import Store, StoreFailed
from worker.logs import fields
from worker.state import keys

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from worker.metrics import Metrics

log = logging.getLogger("research.archive")

QUEUE_ITEMS = 256
QUEUE_BYTES = 128 * 1024 * 1024
WRITERS = 8  # store writes are network round trips (S3): several at once keep the queue short
CONFIRM_S = 2.0  # the most a job waits for its record's acceptance (one Redis round trip)
WRITE_TIMEOUT_S = 30.0
RETRY_S = 5.0
DROP_LOG_EVERY_S = 60.0
HEALTH_EVERY_S = 10.0
HEALTH_TTL_S = 60
STOP_DRAIN_S = 30.0  # a clean stop writes what is queued (a full queue is 128 MB: seconds)
CLEAR_EVERY_S = 0.05  # stored records leave the journal in batches this often
SWEEP_EVERY = 30  # health beats between sweeps for stopped workers' unwritten records (5 min)
DEDUP_MIN_BYTES = 1024  # a revisit record is about 700 bytes: smaller payloads are stored again
INLINE_DIGEST_BYTES = 512 * 1024
RETENTION_EVERY_S = 3600.0
# Pointers this worker wrote or read, kept in memory so a repeat costs no store round trip.
KNOWN_POINTERS = 4096
DAY_S = 86_400


class Receipt:
    """What a job learns of its records: the ids they will have, and whether they were accepted
    (indexed for the report, and pending in this worker's journal until stored)."""

    def __init__(
        self,
        record: str | None,
        accepted: asyncio.Future[bool] | None,
        done: asyncio.Future[bool] | None,
        screenshot: str | None = None,
    ) -> None:
        self.record = record
        self.screenshot = screenshot
        self._accepted = accepted
        self._done = done

    async def accepted(self, within_s: float = CONFIRM_S) -> str | None:
        """The record id once it is accepted (it is then stored, or counted lost); None when not."""
        if self._accepted is None or self.record is None:
            return None
        if self._done is not None and self._done.done() and not self._done.result():
            return None  # already known not to be stored
        try:
            async with asyncio.timeout(within_s):
                ok = await asyncio.shield(self._accepted)
        except TimeoutError:
            return None
        return self.record if ok else None

    async def landed(self, within_s: float = CONFIRM_S) -> str | None:
        """The record id once its file is stored; None when it is not (yet). For tests and benches:
        a job never waits for this."""
        if self._done is None or self.record is None or await self.accepted(within_s) is None:
            return None
        try:
            async with asyncio.timeout(within_s):
                ok = await asyncio.shield(self._done)
        except TimeoutError:
            return None
        return self.record if ok else None


DROPPED = Receipt(None, None, None)


@dataclass
class Rendering:
    """What a render adds to its document's exchange: the DOM the browser read, its screenshot."""

    dom: bytes
    screenshot: bytes | None
    screenshot_record: str | None


@dataclass(eq=False)
class _Item:
    report_id: str
    job_id: str | None
    record: str
    size: int
    done: asyncio.Future[bool] | None
    capture: Capture | None = None
    search: Mapping[str, Any] | None = None
    rendering: Rendering | None = None
    at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    accepting: asyncio.Task[bool] | None = None

    @property
    def records(self) -> list[str]:
        shot = self.rendering.screenshot_record if self.rendering is not None else None
        return [self.record] if shot is None else [self.record, shot]


class Archive:
    """One worker's archive writer. ``store`` None: the archive is off, and every receipt is empty."""

    def __init__(
        self,
        store: Store | None,
        redis: Redis,
        metrics: Metrics,
        *,
        queue_name: str,
        worker_id: str,
        days: int,
        window_s: int,
        dedup: bool = True,  # off only to measure what deduplication saves (bench/archive.py)
        info: Mapping[str, str] | None = None,  # the warcinfo fields every file opens with
        secrets: SecretMask | None = None,  # masked in every record (worker.archive.masking)
    ) -> None:
        self.store = store
        self._secrets = secrets if secrets is not None and not secrets.empty else None
        self._dedup = dedup
        self._redis = redis
        self._metrics = metrics
        self._queue_name = queue_name
        self._worker_id = worker_id
        self._days = days
        self._window_s = window_s
        self._info = dict(info or {})
        self._index = ReportIndex(redis, window_s)
        self._pending = journal.pending_key(queue_name, worker_id)
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._queued_bytes = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._side: set[asyncio.Task[Any]] = set()  # index entries on their way (kept from the GC)
        self._writing: set[_Item] = set()
        self._stored: list[str] = []  # stored, still in the journal until the next clearing
        self._clearing: asyncio.Task[None] | None = None
        self._down_until = 0.0
        self._last_failure: str | None = None
        self._last_drop_log = 0.0
        self.counts = {"written": 0, "revisit": 0, "dropped": 0, "failed": 0, "lost": 0}
        self._last_written_at: float | None = None
        self._known: OrderedDict[str, tuple[Original, float]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.store is not None

    def start(self) -> None:
        if self.store is None or self._tasks:
            return
        self._metrics.archive_up.set(1)
        self._tasks = [asyncio.create_task(self._write_loop()) for _ in range(WRITERS)]
        self._tasks.append(asyncio.create_task(self._health_loop()))
        self._tasks.append(asyncio.create_task(self._retention_loop()))

    async def stop(self) -> None:
        """Write every queued record (for at most ``STOP_DRAIN_S``), then stop and close the store;
        a record still unwritten then is counted lost, with why."""
        if self._tasks:
            if self._side:
                await asyncio.gather(*self._side, return_exceptions=True)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STOP_DRAIN_S):
                    await self._queue.join()
            if self._clearing is not None:
                await self._clearing
            await self._clear_stored(0)
            left = list(self._writing)  # about to be cut off mid-write
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._tasks = []
            while not self._queue.empty():
                left.append(self._queue.get_nowait())
            if left:
                log.warning(
                    "archive records not written before the worker stopped", extra=fields(count=len(left))
                )
                with contextlib.suppress(RedisError, OSError):
                    await self._lost(left, "the worker stopped before writing it")
        if self.store is not None:
            with contextlib.suppress(StoreFailed, OSError):
                await self.store.close()

    def fetched(self, report_id: str, capture: Capture, job_id: str | None = None) -> Receipt:
        """Queue a fetch's records; the receipt names the final response's record id."""
        return self._offer(report_id, job_id, _capture_size(capture), capture=capture)

    def rendered(
        self,
        report_id: str,
        capture: Capture,
        dom: bytes,
        screenshot: bytes | None,
        job_id: str | None = None,
    ) -> Receipt:
        """Queue a render's records: its document's exchange with the DOM as a ``conversion``, and
        its screenshot in a file of its own; the receipt names the response and the screenshot."""
        shot = new_record_id() if screenshot is not None else None
        size = _capture_size(capture) + len(dom) + len(screenshot or b"")
        return self._offer(
            report_id, job_id, size, capture=capture, rendering=Rendering(dom, screenshot, shot)
        )

    def searched(
        self,
        report_id: str,
        *,
        endpoint: str,
        content_type: str,
        answer: bytes,
        summary: Mapping[str, Any],
        job_id: str | None = None,
    ) -> Receipt:
        search = {"endpoint": endpoint, "content_type": content_type, "answer": answer, "summary": summary}
        return self._offer(report_id, job_id, len(answer), search=search)

    def cite(self, report_id: str, record: str) -> None:
        """A result that reuses another fetch's record (a cache hit, a continuation): index it too."""
        if self.store is None or parse_record_id(record) is None:
            return
        self._side_task(self._index_only(report_id, record))

    async def _index_only(self, report_id: str, record: str) -> None:
        with contextlib.suppress(RedisError, OSError):
            await self._index.add(report_id, record)

    def _side_task(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        self._side.add(task)
        task.add_done_callback(self._side.discard)
        return task

    def _offer(self, report_id: str, job_id: str | None, size: int, **what: Any) -> Receipt:
        if self.store is None or not self._has_room(size):
            return DROPPED
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        item = _Item(report_id, job_id, new_record_id(), size, done, **what)
        item.accepting = self._side_task(self._accept(item))
        self._put(item)
        shot = item.rendering.screenshot_record if item.rendering is not None else None
        return Receipt(item.record, item.accepting, done, shot)

    async def _accept(self, item: _Item) -> bool:
        """The report's index and this worker's journal name the records, in one round trip."""
        mapping = {record: item.report_id for record in item.records}

        def also(pipe: Any) -> None:
            pipe.hset(self._pending, mapping=mapping)
            pipe.expire(self._pending, journal.PENDING_TTL_S)

        try:
            for record in item.records[:-1]:
                await self._index.add(item.report_id, record)
            await self._index.add(item.report_id, item.records[-1], also)
        except (RedisError, OSError):
            return False
        return True

    def _has_room(self, size: int) -> bool:
        now = time.monotonic()
        if now < self._down_until:
            why = "the archive store failed recently"
        elif self._queue.qsize() >= QUEUE_ITEMS or self._queued_bytes + size > QUEUE_BYTES:
            why = "the archive writer's queue is full"
        else:
            return True
        self._count("dropped")
        if now - self._last_drop_log >= DROP_LOG_EVERY_S:
            self._last_drop_log = now
            log.warning("archive record dropped", extra=fields(why=why, dropped=self.counts["dropped"]))
        return False

    def _put(self, item: _Item) -> None:
        self._queued_bytes += item.size
        self._queue.put_nowait(item)
        self._metrics.archive_queue.set(self._queue.qsize())

    def _count(self, outcome: str, by: int = 1) -> None:
        self.counts[outcome] += by
        self._metrics.archive_records.labels(outcome).inc(by)

    async def _write_loop(self) -> None:
        while True:
            item = await self._queue.get()
            self._writing.add(item)
            try:
                ok = await self._write(item)
                await self._settle(item, ok)
            finally:
                self._writing.discard(item)
                self._queued_bytes -= item.size
                self._metrics.archive_queue.set(self._queue.qsize())
                self._queue.task_done()
            if item.done is not None and not item.done.done():
                item.done.set_result(ok)

    async def _settle(self, item: _Item, ok: bool) -> None:
        """Out of the journal: stored, or (when it was accepted) counted lost with why."""
        accepted = item.accepting is not None and await item.accepting
        if not accepted:
            return
        if ok:
            self._stored.extend(item.records)
            if self._clearing is None:
                self._clearing = self._side_task(self._clear_stored(CLEAR_EVERY_S))
            return
        with contextlib.suppress(RedisError, OSError):
            await self._lost([item], self._last_failure or "the write failed")

    async def _clear_stored(self, after_s: float) -> None:
        """Stored records out of the journal, many in one HDEL (a round trip per record costs the
        event loop more than the wait: a kill in between counts a stored record as lost, and its
        export still finds it)."""
        await asyncio.sleep(after_s)
        self._clearing = None
        stored, self._stored = self._stored, []
        if stored:
            with contextlib.suppress(RedisError, OSError):
                await self._redis.hdel(self._pending, *stored)  # type: ignore[misc]

    async def _lost(self, items: list[_Item], why: str) -> None:
        now = time.time()
        lost = [
            journal.Lost(record, item.report_id, self._worker_id, why, now)
            for item in items
            for record in item.records
        ]
        await journal.mark_lost(self._redis, self._queue_name, lost)
        await self._redis.hdel(self._pending, *[entry.record for entry in lost])  # type: ignore[misc]
        self._count("lost", len(lost))

    async def _write(self, item: _Item) -> bool:
        assert self.store is not None
        try:
            async with asyncio.timeout(WRITE_TIMEOUT_S):
                if item.capture is not None:
                    await self._store_fetch(self.store, item, item.capture)
                elif item.search is not None:
                    await self._store_search(self.store, item, item.search)
        except (StoreFailed, TimeoutError) as exc:
            reason = exc.reason if isinstance(exc, StoreFailed) else "the write took too long"
            self._failed(reason)
            return False
        except (RedisError, OSError) as exc:
            self._failed(f"the write failed ({type(exc).__name__})")
            return False
        except Exception:  # a bug: the fetch stands, the record does not, and the log says where
            log.exception("archive write failed unexpectedly")
            self._count("failed")
            return False
        if self._last_failure is not None:
            log.info("archive store works again", extra=fields(where=self.store.where))
            self._last_failure = None
            self._metrics.archive_up.set(1)
        self._last_written_at = time.time()
        return True

    def _stamp(self, item: _Item) -> Stamp:
        return Stamp(item.report_id, item.job_id, self._info)

    def _failed(self, reason: str) -> None:
        self._count("failed")
        self._down_until = time.monotonic() + RETRY_S
        self._metrics.archive_up.set(0)
        if reason != self._last_failure:
            where = self.store.where if self.store is not None else "-"
            log.warning(
                "archive write failed; records are dropped for a while",
                extra=fields(why=reason, where=where, retry_in_s=RETRY_S),
            )
        self._last_failure = reason

    async def _store_fetch(self, store: Store, item: _Item, capture: Capture) -> None:
        if self._secrets is not None:
            capture = await asyncio.to_thread(self._secrets.capture, capture)
        final = capture.final
        body = final.body() if final is not None else b""
        original: Original | None = None
        digest: str | None = None
        if self._dedup and len(body) >= DEDUP_MIN_BYTES:
            # SHA-1 runs at about 1 GB/s: a page's digest costs less than a turn through a thread.
            small = len(body) <= INLINE_DIGEST_BYTES
            digest = payload_digest(body) if small else await asyncio.to_thread(payload_digest, body)
            original = await self._original(store, digest)
        stamp = self._stamp(item)
        rendering = item.rendering
        if rendering is None:
            data = await asyncio.to_thread(fetch_file, capture, item.record, stamp, original, digest)
        else:
            dom = masked(self._secrets, rendering.dom)
            data = await asyncio.to_thread(rendered_file, capture, item.record, stamp, dom, original, digest)
            if rendering.screenshot is not None and rendering.screenshot_record is not None:
                at = final.at if final is not None else item.at
                url = final.url if final is not None else ""
                shot = screenshot_file(rendering.screenshot_record, url, at, rendering.screenshot, stamp)
                await store.create(file_key(rendering.screenshot_record), shot)
                self._metrics.archive_bytes.inc(len(shot))
        await store.create(file_key(item.record), data)
        self._metrics.archive_bytes.inc(len(data))
        if original is not None:
            self._count("revisit")
            return
        self._count("written")
        if digest is not None and final is not None and self.pointer_age_s >= 1:
            now = time.time()
            original = Original(item.record, final.url, warc_date(final.at))
            pointer = {"record": original.record, "uri": original.uri, "date": original.date, "at": now}
            # The pointer lives as long as an original may be referred to; without it (Redis
            # down), the next copy is stored whole.
            with contextlib.suppress(RedisError, OSError):
                await self._redis.set(
                    self._pointer_key(store, digest), orjson.dumps(pointer), ex=int(self.pointer_age_s)
                )
            self._remember(digest, original, now)

    def _pointer_key(self, store: Store, digest: str) -> str:
        identity = hashlib.sha256(store.identity.encode()).hexdigest()[:32]
        return keys.archive_pointer(self._queue_name, identity, digest_name(digest))

    def _remember(self, digest: str, original: Original, at: float) -> None:
        self._known[digest] = (original, at)
        self._known.move_to_end(digest)
        while len(self._known) > KNOWN_POINTERS:
            self._known.popitem(last=False)

    async def _original(self, store: Store, digest: str) -> Original | None:
        """The earlier record with this payload, when one exists that an export can still reach."""
        known = self._known.get(digest)
        if known is not None and time.time() - known[1] <= self.pointer_age_s:
            return known[0]
        try:
            raw = await self._redis.get(self._pointer_key(store, digest))
        except (RedisError, OSError):
            return None
        try:
            pointer = orjson.loads(raw) if raw is not None else None
        except orjson.JSONDecodeError:
            return None
        if not isinstance(pointer, dict):
            return None
        record, uri, date, at = (pointer.get(k) for k in ("record", "uri", "date", "at"))
        if parse_record_id(record) is None or not isinstance(uri, str) or not isinstance(date, str):
            return None
        if not isinstance(at, int | float) or time.time() - at > self.pointer_age_s:
            return None
        original = Original(str(record), uri, date)
        self._remember(digest, original, float(at))
        return original

    @property
    def pointer_age_s(self) -> float:
        """How old an original may be to be referred to: a report's index lives one budget window,
        so an export within it still finds the original before retention deletes it."""
        return max(0.0, self._days * DAY_S - self._window_s - DAY_S)

    async def _store_search(self, store: Store, item: _Item, search: Mapping[str, Any]) -> None:
        data = await asyncio.to_thread(self._search_file, item, search)
        await store.create(file_key(item.record), data)
        self._metrics.archive_bytes.inc(len(data))
        self._count("written")

    def _search_file(self, item: _Item, search: Mapping[str, Any]) -> bytes:
        given = masked_search(self._secrets, search)
        return search_file(
            item.record,
            self._stamp(item),
            endpoint=given["endpoint"],
            at=item.at,
            content_type=given["content_type"],
            answer=given["answer"],
            summary=given["summary"],
        )

    def health(self) -> dict[str, object]:
        return {
            "worker_id": self._worker_id,
            "where": self.store.where if self.store is not None else None,
            "up": self._last_failure is None,
            "last_failure": self._last_failure,
            "queued": self._queue.qsize(),
            "last_written_at": self._last_written_at,
            "beat_at": time.time(),
            **self.counts,
        }

    async def _health_loop(self) -> None:
        key = keys.archive_health(self._queue_name, self._worker_id)
        beat = 0
        while True:
            with contextlib.suppress(Exception):
                await self._redis.set(key, orjson.dumps(self.health()), ex=HEALTH_TTL_S)
            if beat % SWEEP_EVERY == 0:
                await self._sweep()
            beat += 1
            await asyncio.sleep(HEALTH_EVERY_S)

    async def _sweep(self) -> None:
        """Count what stopped workers accepted and never wrote (``worker.archive.journal``)."""
        try:
            lost = await journal.sweep(self._redis, self._queue_name, exclude=self._worker_id)
        except (RedisError, OSError):
            return
        if lost:
            self._metrics.archive_records.labels("lost").inc(len(lost))
            log.warning(
                "archive records a stopped worker never wrote",
                extra=fields(count=len(lost), workers=sorted({entry.worker_id for entry in lost})),
            )

    async def _retention_loop(self) -> None:
        while True:
            try:
                await self.apply_retention()
            except StoreFailed as exc:
                log.warning("archive retention could not run", extra=fields(why=exc.reason))
            await asyncio.sleep(RETENTION_EVERY_S)

    async def apply_retention(self, now_s: float | None = None) -> int:
        """Delete whole day folders older than the retention (pointers expire in Redis on their own)."""
        if self.store is None:
            return 0
        now = time.time() if now_s is None else now_s
        oldest_kept = dt.datetime.fromtimestamp(now - self._days * DAY_S, dt.UTC).strftime("%Y-%m-%d")
        deleted = 0
        for day in await self.store.days():
            if day < oldest_kept:
                deleted += await self.store.delete_day(day)
        if deleted:
            log.info("archive retention deleted old files", extra=fields(files=deleted, days=self._days))
        return deleted


def _capture_size(capture: Capture) -> int:
    return sum(len(hop.response_head) + sum(map(len, hop.chunks)) for hop in capture.hops)
