"""The evidence archive end to end: a report's fetches and search, exported as one WARC file that
standard tools read, whose records hold exactly what was read, from the address connected to."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.support.archive import by_id, content_of, exported, make_bucket, moto_s3, read_records, sha256
from tests.support.fake_dns import FakeResolver
from tests.support.fake_searxng import fake_searxng
from tests.support.fetching import fetch_settings
from tests.support.pdfs import text_pdf
from tests.support.tls import TestCA, TlsServer, serve
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import ArchiveBucket, ArchiveDirectory, ArchiveTarget, SearchProvider, Settings
from worker.settings import tools
from worker.state import keys

PAGE = b"<html><head><title>Plain</title></head><body><p>" + b"A plain page. " * 200 + b"</p></body></html>"
ZIPPED = b"<html><head><title>Zipped</title></head><body><p>" + b"A gzip page. " * 300 + b"</p></body></html>"
SHARED = (
    b"<html><head><title>Shared</title></head><body><p>"
    + b"Shared by reports. " * 100
    + b"</p></body></html>"
)
END = b"<html><head><title>End</title></head><body><p>The end of the chain.</p></body></html>"
PDF = text_pdf("A PDF paragraph about tides.", title="Tides")
# warcio's own command line, from the interpreter running the tests (whatever is on the PATH).
WARCIO = [sys.executable, "-m", "warcio.cli"]


def routes() -> dict[str, Any]:
    async def page(request: web.Request) -> web.Response:
        return web.Response(body=PAGE, content_type="text/html")

    async def zipped(request: web.Request) -> web.Response:
        return web.Response(
            body=gzip.compress(ZIPPED),
            headers={"Content-Type": "text/html", "Content-Encoding": "gzip", "X-Odd": "caf\u00e9"},
        )

    async def shared(request: web.Request) -> web.Response:
        return web.Response(body=SHARED, content_type="text/html")

    async def pdf(request: web.Request) -> web.Response:
        return web.Response(body=PDF, content_type="application/pdf")

    async def hop(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        raise web.HTTPFound("/end" if n == 4 else f"/r/{n + 1}")

    async def end(request: web.Request) -> web.Response:
        return web.Response(body=END, content_type="text/html")

    return {"/page": page, "/gz": zipped, "/shared": shared, "/doc.pdf": pdf, "/r/{n}": hop, "/end": end}


def archive_settings(settings: Settings, ca: TestCA, target: ArchiveTarget, **changes: Any) -> Settings:
    return fetch_settings(settings, ca, archive=target, **changes)


@contextlib.asynccontextmanager
async def worker_and_client(settings: Settings, token: str) -> AsyncIterator[ResearchClient]:
    async with (
        running_worker(settings, list(tools(FakeResolver({})))),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=30) as client,
    ):
        yield client


async def five_pages_and_a_search(
    settings: Settings, token: str, report: str, server: TlsServer
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The issue's report: five pages (one gzip, one PDF, one redirect chain, one cache hit shared
    with another report) and one search."""
    other = f"{report}-other"
    async with fake_searxng() as searx:
        s = dataclasses.replace(settings, search_provider=SearchProvider.SEARXNG, searxng_url=searx.base_url)
        async with worker_and_client(s, token) as client:
            first = await client.fetch(other, server.url("/shared"))
            assert first["ok"] and first["cached"] is False
            results = [
                await client.fetch(report, server.url(path))
                for path in ("/page", "/gz", "/doc.pdf", "/r/0", "/shared")
            ]
            found = await client.search(report, "tides", max_results=3)
    for result in results:
        assert result["ok"], result
    assert results[3]["redirects"] == 5
    assert results[4]["cached"] is True
    assert results[4]["archive_record"] == first["archive_record"]
    assert found["ok"], found
    return results, found


def check_export(data: bytes, results: list[dict[str, Any]], found: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "report.warc.gz"
    path.write_bytes(data)
    checked = subprocess.run([*WARCIO, "check", "-v", str(path)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    indexed = subprocess.run([*WARCIO, "index", str(path)], capture_output=True, text=True, timeout=60)
    assert indexed.returncode == 0 and indexed.stdout.count("\n") >= 10, indexed.stderr
    records = read_records(data)
    ids = by_id(records)
    assert records[0].type == "warcinfo"
    for result in results:
        assert result["archived"] is True
        assert len(result["sha256"]) == 64
        assert sha256(content_of(records, result["archive_record"])) == result["sha256"]
        assert ids[result["archive_record"]].headers["WARC-Target-URI"] == result["final_url"]
    for record in records:
        if record.type in ("request", "response", "revisit"):
            assert record.headers["WARC-IP-Address"] == "127.0.0.1"
            assert record.headers["WARC-Target-URI"].startswith("https://127.0.0.1:")
    responses = [r for r in records if r.type == "response"]
    requests = [r for r in records if r.type == "request"]
    # Every hop its own pair: 4 single pages, 6 hops of the chain (5 redirects and the end).
    assert len(responses) == len(requests) == 10
    concurrent = {r.headers["WARC-Concurrent-To"].strip("<>") for r in requests}
    assert concurrent == {r.headers["WARC-Record-ID"].strip("<>") for r in responses}
    assert sorted(r.status for r in responses).count("302") == 5
    zipped = ids[results[1]["archive_record"]]
    assert zipped.http["Content-Encoding"] == "gzip"
    assert zipped.content == ZIPPED
    assert ids[results[2]["archive_record"]].content == PDF
    searches = [r for r in records if r.type == "resource"]
    assert len(searches) == 1 and found["archive_record"] == searches[0].headers["WARC-Record-ID"].strip("<>")
    assert b'"results"' in searches[0].raw
    summary = next(r for r in records if r.type == "metadata")
    assert summary.headers["WARC-Refers-To"].strip("<>") == found["archive_record"]
    assert found["results"][0]["url"].encode() in summary.raw


async def test_a_report_exports_as_one_warc_that_warcio_checks_with_each_result_s_hash_and_address(
    settings: Settings, ca: TestCA, token: str, report: str, redis: Any, tmp_path: Path
) -> None:
    target = ArchiveDirectory(str(tmp_path / "archive"))
    async with serve(routes(), ca.server_context()) as server:
        results, found = await five_pages_and_a_search(
            archive_settings(settings, ca, target), token, report, server
        )
    check_export(await exported(redis, target, report), results, found, tmp_path)


async def test_the_same_report_exports_the_same_way_from_s3_on_a_loopback_server(
    settings: Settings,
    ca: TestCA,
    token: str,
    report: str,
    redis: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with moto_s3(monkeypatch) as s3:
        await make_bucket(s3.endpoint, "evidence")
        target = ArchiveBucket("evidence", f"{token}/")
        s = archive_settings(settings, ca, target, archive_endpoint=s3.endpoint)
        async with serve(routes(), ca.server_context()) as server:
            results, found = await five_pages_and_a_search(s, token, report, server)
        data = await exported(redis, target, report, s3.endpoint)
    check_export(data, results, found, tmp_path)


async def until_pointed(redis: Any, queue_name: str, seconds: float = 60.0) -> None:
    """Until the queue's archive holds a payload pointer (its first full record is written)."""
    pattern = f"{keys.PREFIX}archive:digest:{keys.glob_escape(queue_name)}:*"
    deadline = asyncio.get_running_loop().time() + seconds
    while not [key async for key in redis.scan_iter(match=pattern, count=1000)]:
        assert asyncio.get_running_loop().time() < deadline, "the first record was never written"
        await asyncio.sleep(0.05)


async def test_a_page_fetched_again_with_the_same_bytes_is_a_revisit_of_the_first_record(
    settings: Settings, ca: TestCA, token: str, report: str, redis: Any, tmp_path: Path
) -> None:
    target = ArchiveDirectory(str(tmp_path / "archive"))
    s = archive_settings(settings, ca, target, cache_ttl_s=0)  # no cache: every fetch goes to the server
    async with serve(routes(), ca.server_context()) as server, worker_and_client(s, token) as client:
        first = await client.fetch(report, server.url("/page"))
        # Records are written off the job: a copy fetched while the first is still being written
        # is rightly stored whole (there is no original to point to yet). Under load that window is
        # long, so the second fetch waits for the first record's pointer.
        await until_pointed(redis, s.queue_name)
        again = await client.fetch(f"{report}-b", server.url("/page"))
    assert first["archive_record"] != again["archive_record"]
    records = read_records(await exported(redis, target, f"{report}-b"))
    revisit = by_id(records)[again["archive_record"]]
    assert revisit.type == "revisit"
    assert revisit.headers["WARC-Refers-To"].strip("<>") == first["archive_record"]
    assert revisit.headers["WARC-Profile"].endswith("/revisit/identical-payload-digest")
    # The export of the second report carries the original too, so the page replays from it.
    assert sha256(content_of(records, again["archive_record"])) == again["sha256"]
    stored = sum(f.stat().st_size for f in (tmp_path / "archive" / "records").rglob("*.warc.gz"))
    assert stored < 2 * len(PAGE) // 4 + 4096  # the page's bytes once (compressed), not twice


async def test_the_archive_command_writes_the_report_s_file_and_says_when_there_is_none(
    settings: Settings, ca: TestCA, token: str, report: str, tmp_path: Path
) -> None:
    from tests.support.processes import settings_env
    from tests.support.run_cli import run_cli

    target = ArchiveDirectory(str(tmp_path / "archive"))
    s = archive_settings(settings, ca, target)
    async with serve(routes(), ca.server_context()) as server, worker_and_client(s, token) as client:
        result = await client.fetch(report, server.url("/page"))
    env = settings_env(s, RESEARCH_ARCHIVE=target.path)
    out = tmp_path / "r.warc.gz"
    done = await asyncio.to_thread(run_cli, "archive", report, "-o", str(out), env=env)
    assert done.returncode == 0, done.stderr
    records = read_records(out.read_bytes())
    assert sha256(content_of(records, result["archive_record"])) == result["sha256"] == sha256(PAGE)
    checked = subprocess.run([*WARCIO, "check", str(out)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout
    nothing = await asyncio.to_thread(
        run_cli, "archive", f"{report}-none", "-o", str(tmp_path / "n"), env=env
    )
    assert nothing.returncode == 1 and "cites no archived record" in nothing.stderr
    off = await asyncio.to_thread(run_cli, "archive", report, env={**env, "RESEARCH_ARCHIVE": "off"})
    assert off.returncode == 2 and "archive is off" in off.stderr
