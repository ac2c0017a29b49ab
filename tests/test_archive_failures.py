"""The archive fails, the fetch does not: a store that is down, full or refusing costs a record,
never a fetch; and the archive's hostile inputs (8 KB URLs, gzip bombs, path-shaped report ids,
10 MB search answers) each end as documented."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import re
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from tests.support.archive import by_id, exported, make_bucket, moto_s3, read_records, sha256
from tests.support.fake_searxng import fake_searxng, huge_answer
from tests.support.fetching import fetch_settings
from tests.support.run_cli import run_cli
from tests.support.tls import TestCA, serve
from tests.test_archive import PAGE, worker_and_client
from worker.archive import index, journal, writer
from worker.archive.capture import Capture, Hop
from worker.archive.directory import DirectoryStore
from worker.archive.ids import new_record_id
from worker.archive.s3 import S3Store
from worker.archive.store import StoreFailed
from worker.archive.writer import Archive
from worker.config import ArchiveBucket, ArchiveDirectory, SearchProvider, Settings
from worker.logs import FIELDS_ATTR
from worker.metrics import Metrics
from worker.state import keys

MIB = 1024 * 1024


async def page(request: web.Request) -> web.Response:
    return web.Response(body=PAGE, content_type="text/html")


def failed_count(worker_metrics: Metrics, outcome: str) -> float:
    value = worker_metrics.registry.get_sample_value("research_archive_records_total", {"outcome": outcome})
    return value or 0.0


async def fetch_once(settings: Settings, token: str, report: str, ca: TestCA) -> dict[str, Any]:
    async with (
        serve({"/": page}, ca.server_context()) as server,
        worker_and_client(settings, token) as client,
    ):
        return await client.fetch(report, server.url("/"))


def assert_fetched_without_archive(result: dict[str, Any]) -> None:
    assert result["ok"] is True, result
    assert "A plain page." in result["text"]
    assert result["sha256"] == sha256(PAGE)  # the hash is the reader's, archive or not
    assert result["archived"] is False
    assert result["archive_record"] is None


async def assert_fetched_and_accounted(result: dict[str, Any], redis: Any, queue_name: str) -> None:
    """The fetch stands; its record is either not accepted (``archived: false``) or, accepted before
    the store's failure was known, on the lost list with why once its worker stopped."""
    assert result["ok"] is True, result
    assert result["sha256"] == sha256(PAGE)
    if result["archived"] is False:
        assert result["archive_record"] is None
        return
    lost = await journal.lost_records(redis, queue_name, result["report_id"])
    assert result["archive_record"] in [entry.record for entry in lost]
    assert await journal.lost_count(redis, queue_name) >= 1


async def test_with_the_archive_off_a_fetch_still_carries_the_body_s_sha256(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    result = await fetch_once(fetch_settings(settings, ca, archive=None), token, report, ca)
    assert_fetched_without_archive(result)


async def test_a_directory_that_cannot_be_written_costs_the_record_not_the_fetch(
    settings: Settings,
    ca: TestCA,
    token: str,
    report: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    redis: Any,
) -> None:
    # A path under a regular file: no one, root included, can make a folder there.
    (tmp_path / "a-file").write_bytes(b"")
    target = ArchiveDirectory(str(tmp_path / "a-file" / "archive"))
    with caplog.at_level(logging.WARNING, logger="research.archive"):
        result = await fetch_once(fetch_settings(settings, ca, archive=target), token, report, ca)
    await assert_fetched_and_accounted(result, redis, settings.queue_name)
    assert any("archive write failed" in r.getMessage() for r in caplog.records)


async def test_a_disk_that_fills_costs_the_record_not_the_fetch(
    settings: Settings,
    ca: TestCA,
    token: str,
    report: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    redis: Any,
) -> None:
    # The kernel's own ENOSPC: every archive file the store opens writes to /dev/full.
    import worker.archive.directory as directory

    real_open = open

    def full_disk(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "x" in mode or "w" in mode:
            return real_open("/dev/full", "wb")
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(directory, "open", full_disk, raising=False)
    target = ArchiveDirectory(str(tmp_path / "archive"))
    store = DirectoryStore(Path(target.path))
    with pytest.raises(directory.StoreFailed, match="the disk is full"):
        await store.create(f"records/2026-01-01/{new_record_id()[9:]}.warc.gz", b"x" * 10_000)
    result = await fetch_once(fetch_settings(settings, ca, archive=target), token, report, ca)
    await assert_fetched_and_accounted(result, redis, settings.queue_name)
    assert not list((tmp_path / "archive").rglob("*.warc.gz"))  # nothing half-written left behind


async def test_a_bucket_that_refuses_writes_costs_the_record_not_the_fetch(
    settings: Settings, ca: TestCA, token: str, report: str, monkeypatch: pytest.MonkeyPatch, redis: Any
) -> None:
    with moto_s3(monkeypatch) as s3:
        # The bucket does not exist: every write is refused (NoSuchBucket).
        s = fetch_settings(
            settings, ca, archive=ArchiveBucket("no-such-bucket", ""), archive_endpoint=s3.endpoint
        )
        result = await fetch_once(s, token, report, ca)
    await assert_fetched_and_accounted(result, redis, settings.queue_name)


@contextlib.asynccontextmanager
async def silent_server() -> AsyncIterator[str]:
    """Accepts connections and never answers: an object store that hangs."""
    held: list[asyncio.StreamWriter] = []

    async def accept(reader: asyncio.StreamReader, writer_: asyncio.StreamWriter) -> None:
        held.append(writer_)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        for w in held:
            w.close()
        server.close()


async def test_a_store_that_hangs_leaves_the_fetch_answered_within_the_confirm_wait(
    settings: Settings, ca: TestCA, token: str, report: str, monkeypatch: pytest.MonkeyPatch, redis: Any
) -> None:
    monkeypatch.setattr(writer, "STOP_DRAIN_S", 0.1)
    with moto_s3(monkeypatch):  # only for the throwaway credentials
        async with silent_server() as endpoint:
            s = fetch_settings(settings, ca, archive=ArchiveBucket("evidence", ""), archive_endpoint=endpoint)
            result = await fetch_once(s, token, report, ca)
    await assert_fetched_and_accounted(result, redis, settings.queue_name)


def a_capture(size: int) -> Capture:
    capture = Capture()
    capture.hops.append(
        Hop(
            url="https://example.org/",
            at=__import__("datetime").datetime.now(__import__("datetime").UTC),
            peer="127.0.0.1",
            request_head=b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n",
            response_head=b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n",
            identity=True,
            chunks=[b"x" * size],
        )
    )
    return capture


async def test_when_the_writer_s_queue_is_full_a_record_is_dropped_at_once_and_counted(
    redis: Any, token: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(writer, "STOP_DRAIN_S", 0.1)
    metrics = Metrics()
    with moto_s3(monkeypatch):
        async with silent_server() as endpoint:
            archive = Archive(
                S3Store("evidence", "", endpoint),
                redis,
                metrics,
                queue_name=f"q-{token}",
                worker_id=f"w-{token}",
                days=90,
                window_s=60,
            )
            archive.start()
            try:
                with caplog.at_level(logging.WARNING, logger="research.archive"):
                    receipts = [
                        archive.fetched(f"r-{token}", a_capture(100)) for _ in range(writer.QUEUE_ITEMS + 8)
                    ]
                    late = archive.fetched(f"r-{token}", a_capture(100))
            finally:
                await archive.stop()
    assert all(r.record is not None for r in receipts[: writer.QUEUE_ITEMS])
    assert late.record is None and await late.accepted() is None
    assert failed_count(metrics, "dropped") >= 1
    assert any("queue is full" in str(getattr(r, FIELDS_ATTR, {}).get("why")) for r in caplog.records)


async def test_a_record_larger_than_the_queue_s_byte_bound_is_dropped(redis: Any, token: str) -> None:
    archive = Archive(
        DirectoryStore(Path("/nonexistent-never-written")),
        redis,
        Metrics(),
        queue_name=f"q-{token}",
        worker_id=f"w-{token}",
        days=90,
        window_s=60,
    )
    # Not started: nothing is taken off the queue, so the byte bound alone decides.
    assert archive.fetched(f"r-{token}", a_capture(writer.QUEUE_BYTES + 1)).record is None


@pytest.fixture
def dir_target(tmp_path: Path) -> ArchiveDirectory:
    return ArchiveDirectory(str(tmp_path / "archive"))


def stored_names(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]


async def test_an_8_kb_url_is_archived_and_exported_but_never_becomes_a_file_name(
    settings: Settings, ca: TestCA, token: str, report: str, redis: Any, dir_target: ArchiveDirectory
) -> None:
    long_path = "/" + "../%00" * 10 + "a" * 8000

    async def long(request: web.Request) -> web.Response:
        return web.Response(body=PAGE, content_type="text/html")

    async def jump(request: web.Request) -> web.Response:
        raise web.HTTPFound(long_path)

    s = fetch_settings(settings, ca, archive=dir_target)
    async with serve({"/jump": jump, "/{tail:.*}": long}, ca.server_context()) as server:
        async with worker_and_client(s, token) as client:
            result = await client.fetch(report, server.url("/jump"))
    assert result["ok"] and result["archived"], result
    assert len(result["final_url"]) > 8000
    records = read_records(await exported(redis, dir_target, report))
    assert by_id(records)[result["archive_record"]].headers["WARC-Target-URI"] == result["final_url"]
    name = re.compile(r"records/\d{4}-\d{2}-\d{2}/[0-9a-f-]{36}\.warc\.gz")
    names = stored_names(Path(dir_target.path))
    assert names and all(name.fullmatch(n) for n in names), names


async def test_a_gzip_bomb_is_archived_as_read_bounded_by_the_cap(
    settings: Settings, ca: TestCA, token: str, report: str, redis: Any, dir_target: ArchiveDirectory
) -> None:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = b"".join([compressor.compress(b"a" * MIB) for _ in range(256)] + [compressor.flush()])

    async def bombing(request: web.Request) -> web.Response:
        return web.Response(body=bomb, headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"})

    s = fetch_settings(settings, ca, archive=dir_target, fetch_max_bytes=MIB)
    async with serve({"/": bombing}, ca.server_context()) as server, worker_and_client(s, token) as client:
        result = await client.fetch(report, server.url("/"))
    assert result["ok"] and result["truncated"] and result["archived"], result
    data = await exported(redis, dir_target, report)
    assert len(data) < 64 * 1024  # what was read of the bomb (compressed), never what it expands to
    import io

    from warcio.archiveiterator import ArchiveIterator

    for record in ArchiveIterator(io.BytesIO(data)):
        if record.rec_type == "response":
            assert record.rec_headers.get_header("WARC-Truncated") == "length"
            raw = record.raw_stream.read()
            assert len(raw) < len(bomb)
            inflated = zlib.decompressobj(31).decompress(raw, result["bytes_read"])
            assert sha256(inflated) == result["sha256"]  # the reader's bytes are the content's first


@pytest.mark.parametrize("report_id", ["../../etc", "a/b", "%2e%2e%2f", "r\n1", "C:\\x", "x" * 201])
def test_a_path_shaped_report_id_is_refused_by_the_export(report_id: str, tmp_path: Path) -> None:
    env = {**os.environ, "RESEARCH_ARCHIVE": str(tmp_path)}
    done = run_cli("archive", report_id, "-o", str(tmp_path / "out.warc.gz"), env=env)
    assert done.returncode == 2, done.stderr
    assert not (tmp_path / "out.warc.gz").exists()


async def test_a_report_id_of_dots_is_only_a_name(
    settings: Settings, ca: TestCA, token: str, redis: Any, dir_target: ArchiveDirectory
) -> None:
    report = f"..{token}"
    result = await fetch_once(fetch_settings(settings, ca, archive=dir_target), token, report, ca)
    assert result["archived"]
    assert all(not n.startswith("..") for n in stored_names(Path(dir_target.path)))
    # warcinfo (the export's, the file's), response, request
    assert len(read_records(await exported(redis, dir_target, report))) == 4
    await redis.delete(keys.archive_report(report))


async def test_a_ten_megabyte_search_answer_is_refused_and_nothing_is_archived(
    settings: Settings, token: str, report: str, redis: Any, dir_target: ArchiveDirectory
) -> None:
    async with fake_searxng() as searx:
        searx.will(huge_answer(10 * MIB))
        s = dataclasses.replace(
            settings, search_provider=SearchProvider.SEARXNG, searxng_url=searx.base_url, archive=dir_target
        )
        async with worker_and_client(s, token) as client:
            found = await client.search(report, "tides")
    assert found["ok"] is False and found["error"]["kind"] == "upstream_error"
    assert await index.cited(redis, report) == []
    assert not list(Path(dir_target.path).rglob("*.warc.gz"))


@pytest.fixture
def s3_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with moto_s3(monkeypatch) as s3:
        yield s3.endpoint


@pytest.mark.parametrize("kind", ["directory", "s3"])
async def test_retention_deletes_whole_day_folders_older_than_the_days_kept(
    kind: str, tmp_path: Path, redis: Any, token: str, s3_env: str
) -> None:
    if kind == "s3":
        await make_bucket(s3_env, "kept")
        store: Any = S3Store("kept", f"{token}/", s3_env)
    else:
        store = DirectoryStore(tmp_path / "archive")
    old = new_record_id(now_s=1_700_000_000)  # 2023-11-14
    new = new_record_id()
    from worker.archive.ids import file_key

    await store.create(file_key(old), b"old")
    await store.create(file_key(new), b"new")
    archive = Archive(store, redis, Metrics(), queue_name="q", worker_id="w", days=90, window_s=60)
    try:
        assert await archive.apply_retention() == 1
        assert await store.days() == [file_key(new).split("/")[1]]
        assert b"".join([c async for c in store.stream(file_key(new))]) == b"new"
        with pytest.raises(StoreFailed):
            _ = [c async for c in store.stream(file_key(old))]
    finally:
        await store.close()


@pytest.mark.parametrize("kind", ["directory", "s3"])
async def test_a_record_once_written_cannot_be_overwritten(
    kind: str, tmp_path: Path, token: str, s3_env: str
) -> None:
    if kind == "s3":
        await make_bucket(s3_env, "immutable")
        store: Any = S3Store("immutable", f"{token}/", s3_env)
    else:
        store = DirectoryStore(tmp_path / "archive")
    from worker.archive.ids import file_key
    from worker.archive.store import StoreFailed

    key = file_key(new_record_id())
    try:
        await store.create(key, b"first")
        with pytest.raises(StoreFailed, match="exists already"):
            await store.create(key, b"second")
        assert b"".join([c async for c in store.stream(key)]) == b"first"
    finally:
        await store.close()


async def test_the_dashboard_shows_each_worker_s_archive_health(
    settings: Settings, redis: Any, token: str, tmp_path: Path
) -> None:
    from tests.test_dashboard import get, serving, text_of

    (tmp_path / "a-file").write_bytes(b"")
    archive = Archive(
        DirectoryStore(tmp_path / "a-file" / "archive"),
        redis,
        Metrics(),
        queue_name=settings.queue_name,
        worker_id=f"w-{token}",
        days=90,
        window_s=60,
    )
    archive.start()
    try:
        receipt = archive.fetched(f"r-{token}", a_capture(100))
        assert await receipt.landed(within_s=5) is None
        await redis.set(
            keys.archive_health(settings.queue_name, f"w-{token}"), orjson.dumps(archive.health())
        )
    finally:
        await archive.stop()
    async with serving(settings) as base:
        status, _, page_ = await get(f"{base}/")
    assert status == 200
    shown = text_of(page_, "archive")
    assert f"w-{token}" in shown
    assert "failing: the archive path is not a usable directory" in shown
