"""Evidence an admin can stand on (issue 37): failed answers are archived too, every file opens
with its warcinfo, every record names its report and job, a capture cut at the cap carries a
Content-Length that matches the bytes kept, and a record accepted for writing is either stored or
counted lost (on a clean stop, or after its worker was killed)."""

from __future__ import annotations

import asyncio
import gzip
import io
import os
import subprocess
import sys
import zlib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeadersParser

from tests.support.archive import exported, read_records
from tests.support.fake_dns import FakeResolver
from tests.support.fetching import fetch_settings
from tests.support.tls import TestCA, serve
from tests.support.workers import running_worker
from worker.archive import journal
from worker.archive.capture import Capture, Hop
from worker.archive.directory import DirectoryStore
from worker.archive.records import RENAMED_LENGTH, kept_length
from worker.archive.writer import Archive
from worker.client import ResearchClient
from worker.config import ArchiveDirectory, Settings
from worker.metrics import Metrics
from worker.settings import tools
from worker.state import keys

WARCIO = [sys.executable, "-m", "warcio.cli"]
GONE = b"<html><body><p>This filing was withdrawn on the 7th.</p></body></html>"
DOWN = b"<html><body><p>Service unavailable, come back later.</p></body></html>"
LONG = b"<html><body><p>" + b"Long page text. " * 2000 + b"</p></body></html>"
# Compresses to about half: the fetcher stops reading its gzip long before the end.
NOISY = b"<html><body><p>" + os.urandom(200_000).hex().encode() + b"</p></body></html>"


def routes() -> dict[str, Any]:
    async def gone(request: web.Request) -> web.Response:
        return web.Response(status=404, body=GONE, content_type="text/html")

    async def down(request: web.Request) -> web.Response:
        return web.Response(status=503, body=DOWN, content_type="text/html", headers={"Retry-After": "1"})

    async def long(request: web.Request) -> web.Response:
        return web.Response(body=LONG, content_type="text/html")

    async def long_gzip(request: web.Request) -> web.Response:
        return web.Response(
            body=gzip.compress(NOISY), headers={"Content-Type": "text/html", "Content-Encoding": "gzip"}
        )

    return {"/gone": gone, "/down": down, "/long": long, "/long.gz": long_gzip}


async def run_fetches(s: Settings, token: str, report: str, urls: list[str]) -> list[dict[str, Any]]:
    async with (
        running_worker(s, list(tools(FakeResolver({})))),
        ResearchClient(settings=s, job_id_prefix=f"{token}-", wait_s=30) as client,
    ):
        return [await client.fetch(report, url) for url in urls]


def stored_files(root: Path) -> list[bytes]:
    return [path.read_bytes() for path in sorted(root.rglob("*.warc.gz"))]


def warcio_check(data: bytes, tmp_path: Path) -> None:
    path = tmp_path / "export.warc.gz"
    path.write_bytes(data)
    checked = subprocess.run([*WARCIO, "check", "-v", str(path)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


async def test_a_404_and_a_503_are_archived_with_their_bodies_and_exported(
    settings: Settings, ca: TestCA, token: str, report: str, redis: Any, tmp_path: Path
) -> None:
    target = ArchiveDirectory(str(tmp_path / "archive"))
    s = fetch_settings(settings, ca, archive=target, archive_operator="Example Newsroom, evidence desk")
    async with serve(routes(), ca.server_context()) as server:
        gone, down = await run_fetches(s, token, report, [server.url("/gone"), server.url("/down")])
    assert (gone["ok"], gone["status"], down["ok"], down["status"]) == (False, 404, False, 503)
    data = await exported(redis, target, report)
    warcio_check(data, tmp_path)
    records = read_records(data)
    responses = [r for r in records if r.type == "response"]
    assert sorted(r.status or "" for r in responses) == ["404", "503"]
    assert {r.content for r in responses} == {GONE, DOWN}
    # Every record of a job names its report and its job.
    jobs = {gone["job_id"], down["job_id"]}
    stamped = [r for r in records if r.headers.get("WARC-Research-Job")]
    assert {r.headers["WARC-Research-Job"] for r in stamped} == jobs
    assert all(r.headers["WARC-Research-Report"] == report for r in stamped)
    assert {r.type for r in stamped} == {"warcinfo", "response", "request"}


async def test_every_stored_file_opens_with_a_warcinfo_naming_software_operator_agent_and_robots(
    settings: Settings, ca: TestCA, token: str, report: str, tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    s = fetch_settings(
        settings, ca, archive=ArchiveDirectory(str(root)), archive_operator="Example Newsroom", robots=False
    )
    async with serve(routes(), ca.server_context()) as server:
        results = await run_fetches(s, token, report, [server.url("/long"), server.url("/gone")])
    assert results[0]["ok"] and results[0]["archived"], results[0]
    files = stored_files(root)
    assert len(files) == 2
    for data in files:
        first = next(iter(ArchiveIterator(io.BytesIO(data))))
        assert first.rec_type == "warcinfo"
        fields = dict(
            line.split(": ", 1)
            for line in first.content_stream().read().decode().splitlines()
            if ": " in line
        )
        assert fields["software"] == f"research-worker/{metadata.version('research-worker')}"
        assert fields["operator"] == "Example Newsroom"
        assert fields["http-header-user-agent"] == s.user_agent
        assert fields["robots"] == "ignore"
        assert fields["format"] == "WARC File Format 1.1"


@pytest.mark.parametrize("path", ["/long", "/long.gz"])
async def test_a_capture_cut_at_the_byte_cap_says_so_and_its_head_says_the_bytes_kept(
    settings: Settings, ca: TestCA, token: str, report: str, redis: Any, tmp_path: Path, path: str
) -> None:
    target = ArchiveDirectory(str(tmp_path / "archive"))
    s = fetch_settings(settings, ca, archive=target, fetch_max_bytes=4096)
    async with serve(routes(), ca.server_context()) as server:
        (result,) = await run_fetches(s, token, report, [server.url(path)])
    assert result["ok"] and result["truncated"], result
    data = await exported(redis, target, report)
    warcio_check(data, tmp_path)
    found = []
    for record in ArchiveIterator(io.BytesIO(data)):
        if record.rec_type == "response":
            found.append((record.rec_headers, record.http_headers, record.raw_stream.read()))
    ((warc, http, payload),) = found
    assert warc.get_header("WARC-Truncated") == "length"
    assert int(http.get_header("Content-Length")) == len(payload)
    sent = len(LONG) if path == "/long" else len(gzip.compress(NOISY))
    assert http.get_header("X-Archive-Orig-Content-Length") == str(sent)
    assert len(payload) < sent


header_names = st.sampled_from(["Content-Type", "Content-Length", "content-length", "X-A", "Server", "ETag"])
header_values = st.text(alphabet="abcdefghij0123456789 /;=-", max_size=20)


@hsettings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(header_names, header_values), max_size=8), st.integers(0, 10**9))
def test_a_kept_length_head_says_exactly_the_bytes_kept_and_keeps_every_other_header(
    headers: list[tuple[str, str]], kept: int
) -> None:
    head = b"\r\n".join([b"HTTP/1.1 200 OK", *(f"{k}: {v}".encode() for k, v in headers)]) + b"\r\n\r\n"
    rewritten = kept_length(head, kept)
    parsed = StatusAndHeadersParser(["HTTP/1.0", "HTTP/1.1"]).parse(io.BytesIO(rewritten))
    lengths = [v for k, v in parsed.headers if k.lower() == "content-length"]
    declared = [v for k, v in headers if k.lower() == "content-length"]
    if not declared:
        assert rewritten == head  # no length said: left exactly as received
        return
    assert lengths == [str(kept)]
    others = [(k, v.strip()) for k, v in headers if k.lower() != "content-length"]
    assert [
        (k, v)
        for k, v in parsed.headers
        if k.lower() not in ("content-length",) and not k.lower().startswith("x-archive-orig-content-length")
    ] == others
    if declared != [str(kept)]:
        originals = [line for line in rewritten.split(b"\r\n") if line.startswith(RENAMED_LENGTH)]
        assert len(originals) == len(declared)


class SlowStore:
    """A directory store whose writes take a while: a clean stop must still write every one."""

    def __init__(self, root: Path, delay_s: float) -> None:
        self.inner = DirectoryStore(root)
        self.delay_s = delay_s
        self.where = self.inner.where
        self.identity = self.inner.identity

    async def create(self, key: str, data: bytes) -> None:
        await asyncio.sleep(self.delay_s)
        await self.inner.create(key, data)

    def stream(self, key: str) -> Any:
        return self.inner.stream(key)

    async def days(self) -> list[str]:
        return await self.inner.days()

    async def delete_day(self, day: str) -> int:
        return await self.inner.delete_day(day)

    async def close(self) -> None:
        await self.inner.close()


class HangingStore(SlowStore):
    """A store whose writes never finish (its worker is killed before any lands)."""

    async def create(self, key: str, data: bytes) -> None:
        await asyncio.Event().wait()


def a_capture(n: int) -> Capture:
    import datetime as dt

    capture = Capture()
    capture.hops.append(
        Hop(
            url=f"https://example.org/{n}",
            at=dt.datetime.now(dt.UTC),
            peer="127.0.0.1",
            request_head=b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n",
            response_head=b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n",
            identity=True,
            chunks=[f"page {n} ".encode() * 50],
        )
    )
    return capture


def an_archive(store: Any, redis: Any, token: str, worker: str) -> Archive:
    return Archive(
        store, redis, Metrics(), queue_name=f"q-{token}", worker_id=f"{worker}-{token}", days=90, window_s=60
    )


async def test_a_clean_stop_writes_every_accepted_record_first(
    redis: Any, token: str, tmp_path: Path
) -> None:
    archive = an_archive(SlowStore(tmp_path / "a", 0.02), redis, token, "clean")
    archive.start()
    receipts = [archive.fetched(f"r-{token}", a_capture(n), f"job-{n}") for n in range(60)]
    accepted = [await receipt.accepted(within_s=10) for receipt in receipts]
    assert all(accepted)
    await archive.stop()  # most are still queued: 60 writes of 20 ms over 8 writers
    names = {p.name.removesuffix(".warc.gz") for p in (tmp_path / "a").rglob("*.warc.gz")}
    assert names == {record.removeprefix("urn:uuid:") for record in accepted if record}
    assert await redis.hlen(keys.archive_pending(f"q-{token}", f"clean-{token}")) == 0
    assert await journal.lost_count(redis, f"q-{token}") == 0


async def test_a_killed_worker_s_unwritten_records_are_counted_and_named(
    redis: Any, token: str, tmp_path: Path, settings: Settings
) -> None:
    queue = f"q-{token}"
    killed = an_archive(HangingStore(tmp_path / "k", 0), redis, token, "killed")
    killed.start()
    receipts = [killed.fetched(f"r-{token}", a_capture(n), f"job-{n}") for n in range(5)]
    accepted = [await receipt.accepted(within_s=10) for receipt in receipts]
    assert all(accepted)
    # Killed: its tasks end without a stop, and its health key expires with it.
    for task in killed._tasks:
        task.cancel()
    await asyncio.gather(*killed._tasks, return_exceptions=True)
    await redis.delete(keys.archive_health(queue, f"killed-{token}"))

    from worker.dashboard.archive import read_archive

    rows = await read_archive(redis, queue, 0.0)
    assert [(row.worker_id, row.lost) for row in rows if row.worker_id == f"killed-{token}"] == [
        (f"killed-{token}", 5)
    ]
    # Another worker's sweep moves them to the lost list, once, even when two sweep at once.
    moved = await asyncio.gather(journal.sweep(redis, queue), journal.sweep(redis, queue))
    assert sorted(entry.record for batch in moved for entry in batch) == sorted(r for r in accepted if r)
    assert await journal.lost_count(redis, queue) == 5
    lost = await journal.lost_records(redis, queue, f"r-{token}")
    assert {entry.record for entry in lost} == set(accepted)
    said = journal.explain_missing([r for r in accepted if r], 5, lost, "here")
    assert "5 of them were accepted and never written (its worker stopped before writing it)" in said


async def test_a_write_that_fails_after_the_record_was_accepted_is_counted_lost_at_once(
    redis: Any, token: str, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_bytes(b"")
    archive = an_archive(DirectoryStore(tmp_path / "a-file" / "archive"), redis, token, "failing")
    archive.start()
    try:
        receipt = archive.fetched(f"r-{token}", a_capture(1), "job-1")
        record = await receipt.accepted(within_s=10)
        assert await receipt.landed(within_s=10) is None
    finally:
        await archive.stop()
    if record is not None:  # accepted before the failure was known: counted lost, with why
        (entry,) = await journal.lost_records(redis, f"q-{token}", f"r-{token}")
        assert entry.record == record
        assert entry.why  # the store's own reason
    assert archive.counts["failed"] == 1


def test_a_revisit_or_stored_file_is_never_left_half_compressed() -> None:
    """Each record of a stored file is a gzip member of its own (files concatenate into one)."""
    from worker.archive.records import Stamp, fetch_file

    data = fetch_file(a_capture(3), "urn:uuid:01934b6e-0000-7000-8000-000000000000", Stamp("r", "j", {}))
    members = 0
    while data:
        inflater = zlib.decompressobj(31)
        inflater.decompress(data)
        assert inflater.eof
        data = inflater.unused_data
        members += 1
    assert members == 3  # warcinfo, response, request
