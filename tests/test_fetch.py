"""fetch_page on the network side: bounds, status, declared types, budget, the command line."""

from __future__ import annotations

import asyncio
import gzip
import json
import subprocess
import sys
import tracemalloc
import zlib
from collections.abc import Iterator

import pytest
from aiohttp import web

from tests.support.fetching import fetch_settings, fetching
from tests.support.processes import ROOT, forget_jobs, settings_env, stop, wait_healthy
from tests.support.tls import TestCA, serve
from worker.config import Settings

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """About 1 MB of gzip that expands to 1 GB of text."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"a" * MIB
    parts = [compressor.compress(block) for _ in range(1024)]
    parts.append(compressor.flush())
    return b"".join(parts)


async def html(request: web.Request) -> web.Response:
    return web.Response(
        text="<html><head><title>T</title></head><body><h1>Head</h1><p>Body text.</p></body></html>",
        content_type="text/html",
    )


async def test_a_typical_page_comes_back_with_the_contract_fields(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async with serve({"/": html}, ca.server_context()) as server:
        async with fetching(fetch_settings(settings, ca), token, report) as h:
            result = await h.fetch(server.url("/"))
    assert result["ok"] is True
    for field in (
        "url",
        "final_url",
        "status",
        "content_type",
        "title",
        "text",
        "truncated",
        "redirects",
        "bytes_read",
        "fetched_at",
        "extraction",
        "links",
        "hidden_removed",
    ):
        assert field in result, field
    assert result["status"] == 200
    assert result["content_type"] == "text/html"
    assert result["title"] == "T"
    assert "Body text." in result["text"]
    assert result["truncated"] is False
    assert result["redirects"] == 0
    assert result["fetched_at"].endswith("Z")


async def test_a_gzip_bomb_costs_at_most_the_cap_and_comes_back_truncated(
    settings: Settings, ca: TestCA, token: str, report: str, gzip_bomb: bytes
) -> None:
    async def bomb(request: web.Request) -> web.Response:
        return web.Response(
            body=gzip_bomb,
            headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"},
        )

    async with serve({"/": bomb}, ca.server_context()) as server:
        async with fetching(fetch_settings(settings, ca), token, report) as h:
            tracemalloc.start()
            try:
                result = await h.fetch(server.url("/"))
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
    assert result["ok"] is True
    assert result["truncated"] is True
    assert result["bytes_read"] == 2 * MIB
    assert len(result["text"]) == 40_000
    # The whole process (server, worker and client in one loop) stays far below the 1 GB body.
    assert peak < 120 * MIB


async def test_a_six_megabyte_body_is_cut_at_the_cap(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async def big(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * (6 * MIB), content_type="text/plain")

    async with serve({"/": big}, ca.server_context()) as server:
        async with fetching(fetch_settings(settings, ca), token, report) as h:
            result = await h.fetch(server.url("/"))
    assert result["ok"] is True
    assert result["truncated"] is True
    assert result["bytes_read"] == 2 * MIB


async def test_a_body_without_length_or_end_is_cut_at_the_cap(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        # Endless to the client, bounded here: once the client hangs up, an SSL transport may
        # accept writes without raising (asyncio only logs them), and a loop that never yields
        # never hears that it closed. So it yields each round, stops when the transport closes,
        # and gives up at 32 times the cap, far past what a working fetch reads.
        try:
            for _ in range(32 * 2 * MIB // 65536):
                if request.transport is None or request.transport.is_closing():
                    break
                await response.write(b"y" * 65536)
                await asyncio.sleep(0)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return response

    async with serve({"/": endless}, ca.server_context()) as server:
        async with fetching(fetch_settings(settings, ca), token, report) as h:
            result = await h.fetch(server.url("/"))
    assert result["ok"] is True
    assert result["truncated"] is True
    assert result["bytes_read"] == 2 * MIB


async def test_a_server_that_drips_hits_the_time_bound(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async def drip(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        try:
            for _ in range(60):
                await response.write(b"z")
                await asyncio.sleep(1)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return response

    s = fetch_settings(settings, ca, fetch_timeout_s=1.5)
    async with serve({"/": drip}, ca.server_context()) as server:
        async with fetching(s, token, report) as h:
            result = await h.fetch(server.url("/"))
    assert result["error"]["kind"] == "timeout"


async def test_a_404_is_an_http_status_error_with_the_status(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404, text="nope")

    async with serve({"/": missing}, ca.server_context()) as server:
        async with fetching(fetch_settings(settings, ca), token, report) as h:
            result = await h.fetch(server.url("/"))
    assert result["ok"] is False
    assert result["error"]["kind"] == "http_status"
    assert result["status"] == 404
    assert "404" in result["error"]["message"]


async def test_an_empty_2xx_body_is_ok_with_empty_text(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async def empty(request: web.Request) -> web.Response:
        return web.Response(status=200, body=b"", content_type="text/html")

    async with serve({"/": empty}, ca.server_context()) as server:
        async with fetching(fetch_settings(settings, ca), token, report) as h:
            result = await h.fetch(server.url("/"))
    assert result["ok"] is True
    assert result["text"] == ""
    assert result["bytes_read"] == 0


async def test_a_declared_binary_type_is_refused_before_the_body_is_read(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    written: list[int] = []

    async def image(request: web.Request) -> web.StreamResponse:
        # A type nothing reads (PNG, JPEG, TIFF, WebP and GIF are read by OCR: tests/test_ocr.py).
        response = web.StreamResponse(headers={"Content-Type": "image/bmp"})
        await response.prepare(request)
        try:
            for _ in range(200):
                await response.write(b"BM" + b"\0" * 65534)
                written.append(1)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return response

    async with serve({"/": image}, ca.server_context()) as server:
        async with fetching(fetch_settings(settings, ca), token, report) as h:
            result = await h.fetch(server.url("/"))
    assert result["error"]["kind"] == "unsupported_content_type"
    assert "image/bmp" in result["error"]["message"]
    assert len(written) < 200  # the connection was dropped, not drained


async def test_json_comes_back_exactly_as_served(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    body = '{\n  "b": [1, 2,   3],\n\t"a": "ü"\n}'

    async def api(request: web.Request) -> web.Response:
        return web.Response(body=body.encode(), headers={"Content-Type": "application/json; charset=utf-8"})

    async with serve({"/": api}, ca.server_context()) as server:
        async with fetching(fetch_settings(settings, ca), token, report) as h:
            result = await h.fetch(server.url("/"), format="text")
    assert result["ok"] is True
    assert result["text"] == body
    assert result["content_type"] == "application/json"


async def test_oversized_headers_are_a_connection_failure(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async def huge_headers(request: web.Request) -> web.Response:
        return web.Response(text="x", headers={"X-Big": "v" * 20000}, content_type="text/plain")

    async with serve(
        {"/": huge_headers}, ca.server_context(), handler_args={"max_field_size": 40000}
    ) as server:
        async with fetching(fetch_settings(settings, ca), token, report) as h:
            result = await h.fetch(server.url("/"))
    assert result["error"]["kind"] == "connection_failed"


async def test_a_gzip_page_is_decompressed(settings: Settings, ca: TestCA, token: str, report: str) -> None:
    async def zipped(request: web.Request) -> web.Response:
        return web.Response(
            body=gzip.compress(b"<p>compressed words</p>"),
            headers={"Content-Type": "text/html", "Content-Encoding": "gzip"},
        )

    async with serve({"/": zipped}, ca.server_context()) as server:
        async with fetching(fetch_settings(settings, ca), token, report) as h:
            result = await h.fetch(server.url("/"))
    assert "compressed words" in result["text"]


async def test_25_fetches_then_budget_exhausted_and_another_report_unaffected(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async with serve({"/": html}, ca.server_context()) as server:
        async with fetching(fetch_settings(settings, ca), token, report) as h:
            results = await asyncio.gather(*(h.fetch(server.url("/")) for _ in range(30)))
            other = await h.fetch(server.url("/"), report=f"{report}-other")
    kinds = [r["error"]["kind"] if not r["ok"] else "ok" for r in results]
    assert kinds.count("ok") == 25
    assert kinds.count("budget_exhausted") == 5
    assert other["ok"] is True


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        ({}, "invalid_request"),
        ({"url": 5}, "invalid_request"),
        ({"url": ""}, "invalid_request"),
        ({"url": "https://a.test/" + "x" * 8200}, "invalid_request"),
        ({"url": "https://a.test/", "extract": "everything"}, "invalid_request"),
        ({"url": "ftp://a.test/"}, "scheme_not_allowed"),
        ({"url": "https://user@a.test/"}, "destination_blocked"),
    ],
    ids=["missing url", "url not a string", "empty url", "url too long", "bad extract", "ftp", "userinfo"],
)
async def test_bad_arguments_are_refused_and_not_charged(
    settings: Settings, ca: TestCA, token: str, report: str, args: dict[str, object], kind: str
) -> None:
    async with fetching(fetch_settings(settings, ca), token, report) as h:
        result = await h.client.call("fetch_page", {"report_id": report, **args})
        budget = await h.client.redis.hget(f"research:budget:{report}", "fetch")
    assert result["error"]["kind"] == kind
    assert budget is None


@pytest.fixture
def worker_process(settings: Settings, ca: TestCA) -> Iterator[Settings]:
    """A real `research-worker run` process that trusts the test CA and only 127.0.0.1."""
    env = settings_env(
        settings,
        RESEARCH_GUARDIAN_ALLOW_CIDRS="127.0.0.1/32",
        RESEARCH_CA_BUNDLE=str(ca.bundle),
        RESEARCH_WORKER_ID=f"{settings.worker_id}-cli",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.run_cli", "run"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_healthy(settings, 1)
        yield settings
    finally:
        stop(proc)


async def test_the_fetch_command_seeds_enqueues_waits_and_prints_the_result(
    worker_process: Settings, ca: TestCA, report: str
) -> None:
    async with serve({"/": html}, ca.server_context()) as server:
        env = settings_env(worker_process)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.support.run_cli",
            "fetch",
            server.url("/"),
            "--report",
            report,
            "--seed",
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        refused = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.support.run_cli",
            "fetch",
            server.url("/other"),
            "--report",
            report,
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out_refused, _ = await asyncio.wait_for(refused.communicate(), 60)
    result = json.loads(out)
    refusal = json.loads(out_refused)
    forget_jobs(worker_process, [result["job_id"], refusal["job_id"]])
    assert proc.returncode == 0
    assert result["ok"] is True
    assert "Body text." in result["text"]
    assert refused.returncode == 1
    assert refusal["error"]["kind"] == "url_not_in_menu"
