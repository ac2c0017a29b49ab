"""Long documents read end to end by pieces, and searched, through one worker process.

A local TLS server (its own process) serves a 300-page PDF and a 2 MiB HTML page and counts the
requests that reach it. For each document: the first fetch, then every continuation until
``next_offset`` is null, then 20 finds, all timed as the client sees them (enqueue to result), and
the Redis memory its kept document takes. The anchor is the paging of the MCP reference fetch
server (``start_index``), which fetches the page again for every piece: that costs a first fetch
per piece, printed beside the continuation figures.

    python bench/long_documents.py

Targets (issue 26): continuation p50 at most 5 ms as the client sees it, with no request reaching
the server after the first.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._support import (
    free_port,
    percentile,
    private_redis,
    start_module,
    stop,
    wait_for_health,
    wait_for_port,
    write_test_ca,
)
from worker.client import ResearchClient
from worker.config import Settings
from worker.state import keys

PDF_PAGES = 300
FINDS = 20


def long_pdf() -> bytes:
    from tests.support.pdfs import Page, Text, build_pdf

    pages = []
    for n in range(1, PDF_PAGES + 1):
        lines = [Text(72, 720, f"Page {n}. Note {n} to the consolidated accounts.")]
        lines += [
            Text(72, 700 - 14 * i, f"Line {i}: revenue, costs, provisions and risks of year {n}.")
            for i in range(40)
        ]
        pages.append(Page(lines))
    return build_pdf(pages, compress=True)


def long_html() -> bytes:
    paragraph = "<h2>Section {n}</h2><p>Paragraph {n}: the company reported its figures and its risks.</p>"
    body, n = [], 0
    while sum(map(len, body)) < 2 * 1024 * 1024 - 4096:
        n += 1
        body.append(paragraph.format(n=n))
    return f"<html><title>Long</title><body><article>{''.join(body)}</article></body></html>".encode()


def serve(cert_dir: str, port: int, counts: str) -> None:
    from aiohttp import web

    pdf, html = long_pdf(), long_html()
    served = Path(counts)

    async def document(request: web.Request) -> web.Response:
        with served.open("a") as out:
            out.write(request.path + "\n")
        if request.path == "/report.pdf":
            return web.Response(body=pdf, content_type="application/pdf")
        return web.Response(body=html, content_type="text/html")

    app = web.Application()
    app.router.add_get("/report.pdf", document)
    app.router.add_get("/long.html", document)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(Path(cert_dir) / "server.pem")
    web.run_app(app, host="127.0.0.1", port=port, ssl_context=context, print=None, access_log=None)


async def timed(client: ResearchClient, report: str, url: str, **arguments: object) -> tuple[float, dict]:
    started = time.perf_counter()
    result = await client.fetch(report, url, extract="full", **arguments)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    if not result.get("ok"):
        raise SystemExit(f"a fetch failed: {result}")
    return elapsed, result


async def read_document(settings: Settings, report: str, url: str) -> dict[str, object]:
    async with ResearchClient(settings=settings, wait_s=120) as client:
        first_s, first = await timed(client, report, url)
        pieces, chars, offset = [], len(first["text"]), first["next_offset"]
        while offset is not None:
            elapsed, piece = await timed(client, report, url, offset=offset)
            pieces.append(elapsed)
            chars += len(piece["text"])
            offset = piece["next_offset"]
        words = first["text"].split()
        phrases = [" ".join(words[i : i + 3]) for i in range(0, len(words) - 3, max(1, len(words) // FINDS))][
            :FINDS
        ]
        finds = [(await timed(client, report, url, find=phrase))[0] for phrase in phrases]
        digest = (await client.redis.hget(keys.documents(report), f"full\n{first['url']}")).decode()
        memory = await client.redis.memory_usage(keys.document(digest)) or 0
    return {
        "first_s": first_s,
        "pieces": pieces,
        "finds": finds,
        "whole": chars == first["total_chars"],
        "total_chars": first["total_chars"],
        "memory": memory,
    }


def report_figures(name: str, figures: dict, requests: int) -> None:
    pieces, finds = figures["pieces"], figures["finds"]
    p50, p99 = percentile(pieces, 50) * 1000, percentile(pieces, 99) * 1000
    f50, f99 = percentile(finds, 50) * 1000, percentile(finds, 99) * 1000
    print(f"{name}: {figures['total_chars']:,} characters, read whole by pieces: {figures['whole']}")
    print(f"  first fetch (what start_index paging pays per piece): {figures['first_s'] * 1000:8.1f} ms")
    print(
        f"  continuations, {len(pieces)} pieces:  p50 {p50:6.2f} ms  p99 {p99:6.2f} ms"
        f"  (target p50 <= 5 ms: {'met' if p50 <= 5 else 'MISSED'})"
    )
    print(f"  find, {len(finds)} phrases:        p50 {f50:6.2f} ms  p99 {f99:6.2f} ms")
    print(f"  requests that reached the server: {requests} (target 1)")
    print(f"  Redis memory of the kept document: {figures['memory'] / 1024 / 1024:.2f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", nargs=3, metavar=("CERT_DIR", "PORT", "COUNTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]), args.serve[2])
        return
    with tempfile.TemporaryDirectory() as tmp:
        bundle = write_test_ca(Path(tmp))
        port, counts = free_port(), Path(tmp) / "requests"
        counts.touch()
        server = start_module("bench.long_documents", {}, args=["--serve", tmp, str(port), str(counts)])
        redis = private_redis()
        queue = "bench:long"
        env = {
            "REDIS_URL": redis.url,
            "RESEARCH_QUEUE": queue,
            "RESEARCH_GUARDIAN_ALLOW_CIDRS": "127.0.0.1/32",
            "RESEARCH_CA_BUNDLE": str(bundle),
            "RESEARCH_URL_MENU": "off",
            "RESEARCH_LOG_LEVEL": "WARNING",
            "RESEARCH_READ_BUDGET_CHARS": "100000000",
        }
        worker = start_module("worker.cli", env, args=["run"])
        try:
            wait_for_port(port, timeout_s=60)
            wait_for_health(redis.url, queue, 1)
            settings = Settings(redis_url=redis.url, queue_name=queue)
            for name, path in (("300-page PDF", "/report.pdf"), ("2 MiB HTML page", "/long.html")):
                figures = asyncio.run(
                    read_document(settings, f"bench-{path[1:5]}", f"https://127.0.0.1:{port}{path}")
                )
                requests = counts.read_text().split().count(path)
                report_figures(name, figures, requests)
        finally:
            stop(worker)
            stop(server)
            redis.stop()


if __name__ == "__main__":
    main()
