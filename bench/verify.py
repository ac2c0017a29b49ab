"""Citations: 100 quotes over 25 documents, checked by ``cite`` one at a time and by one ``verify``,
from the kept documents and then from the archive alone, beside a plain fetch's round trip in the
same run; and the matcher alone on growing and adversarial documents (linear time).

The documents are 25 real pages of the extraction corpus (``../shared/data/extraction/zyte-dev``),
served over TLS on loopback by this process to one worker process (its own private Redis, the
archive in a directory, the page cache off so every fetch goes to the server). Each document is
cited four times: a sentence as the page has it, the same upper-cased and re-spaced
(``approximate``), the sentence elided (``first words … last words``), and the sentence with its
longest word changed, which must never be found.

    python bench/verify.py
"""

from __future__ import annotations

import asyncio
import gzip
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._support import DATA, percentile, private_redis, start_module, stop, wait_for_health, write_test_ca
from jobs.cite.matcher import Document
from jobs.reader.document import build_document
from worker.client import ResearchClient
from worker.config import Settings
from worker.limits import EXTRACT_MODES
from worker.state import keys

CORPUS = DATA / "extraction" / "zyte-dev" / "html"
DOCUMENTS = 25
PER_DOCUMENT = 4
CANDIDATES = 60
REPORT = "bench-verify"


def sentences(text: str) -> list[str]:
    found = [s.strip() for s in re.findall(r"[^.!?\n]{30,300}[.!?]", text)]
    return [s for s in found if len(s.split()) >= 8 and text.count(s) == 1]


def citations_of(url: str, text: str) -> list[tuple[dict[str, str], int | None]] | None:
    """Four citations of one document and where each true one starts (None: must not be found)."""
    chosen = sentences(text)
    # The elided one's first words are nowhere else: else its earliest start is as true as this one.
    elidable = [s for s in chosen if text.count(" ".join(s.split()[:3])) == 1]
    chosen = [s for s in chosen if s not in elidable[:1]]
    if len(chosen) < PER_DOCUMENT - 1 or not elidable:
        return None
    a, b, d = chosen[:: max(1, len(chosen) // (PER_DOCUMENT - 1))][: PER_DOCUMENT - 1]
    c = elidable[0]
    words_c = c.split()
    longest = max((w for w in d.split() if w.isalpha()), key=len)
    altered = d.replace(longest, "zebra" if longest.lower() != "zebra" else "yak", 1)
    return [
        ({"url": url, "quote": a}, text.index(a)),
        ({"url": url, "quote": "  ".join(b.upper().split())}, text.index(b)),
        ({"url": url, "quote": " ".join(words_c[:3]) + " \u2026 " + " ".join(words_c[-3:])}, text.index(c)),
        ({"url": url, "quote": altered}, None),
    ]


async def serve(pages: list[bytes], cert_dir: Path) -> tuple[web.AppRunner, int]:
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_dir / "server.pem")

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=pages[int(request.match_info["n"])], content_type="text/html")

    app = web.Application()
    app.router.add_get("/doc/{n}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


def judged(answers: list[dict[str, Any]], expected: list[int | None]) -> str:
    true = [(a, e) for a, e in zip(answers, expected, strict=True) if e is not None]
    false = [a for a, e in zip(answers, expected, strict=True) if e is None]
    found = sum(a["status"] in ("verified", "approximate") for a, _ in true)
    placed = sum(a.get("offset") == e for a, e in true)
    wrong = sum(a["status"] != "not_found" for a in false)
    n = len(true)
    return f"true found {found}/{n}, at the right offset {placed}/{n}, false found {wrong}/{len(false)}"


def p50_p90(values: list[float]) -> str:
    return f"p50 {percentile(values, 50) * 1000:8.1f} ms   p90 {percentile(values, 90) * 1000:8.1f} ms"


def per_m(label: str, size: int, took: float) -> str:
    per = took / (size / 1e6) * 1000
    return f"  {label}{size / 1e6:4.2f} M chars  {took * 1000:8.1f} ms  ({per:6.1f} ms per M chars)"


async def run(redis_url: str, queue: str, port: int) -> None:
    settings = Settings(redis_url=redis_url, queue_name=queue)
    async with ResearchClient(settings=settings, wait_s=120) as client:
        fetch_s: list[float] = []
        dossier: list[dict[str, str]] = []
        expected: list[int | None] = []
        kept_urls: list[str] = []
        for n in range(CANDIDATES):
            url = f"https://127.0.0.1:{port}/doc/{n}"
            started = time.perf_counter()
            result = await client.fetch(REPORT, url, format="text")
            fetch_s.append(time.perf_counter() - started)
            if (
                len(kept_urls) < DOCUMENTS
                and result.get("ok")
                and (cited := citations_of(url, result["text"]))
            ):
                kept_urls.append(url)
                for citation, at in cited:
                    dossier.append(citation)
                    expected.append(at)
        if len(kept_urls) < DOCUMENTS:
            raise SystemExit(f"only {len(kept_urls)} corpus pages had four unique sentences")

        async def rounds(label: str) -> None:
            cite_s, answers = [], []
            for citation in dossier:
                started = time.perf_counter()
                answers.append(await client.run("cite", {"report_id": REPORT, **citation}))
                cite_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            whole = await client.verify(REPORT, dossier)
            verify_s = time.perf_counter() - started
            print(f"{label}:")
            print(f"  cite, one quote a job    {p50_p90(cite_s)}")
            print(f"  verify, 100 in one call  {verify_s * 1000:8.1f} ms ({verify_s * 10:.1f} ms a citation)")
            print(f"  cite answers:   {judged(answers, expected)}")
            print(f"  verify answers: {judged(whole['citations'], expected)}")

        print(f"{len(dossier)} citations over {len(kept_urls)} documents; {len(fetch_s)} plain fetches")
        print(f"plain fetch round trip     {p50_p90(fetch_s)}  (the anchor)")
        await rounds("from the kept documents")
        redis = client.redis
        for url in kept_urls:
            for extract in EXTRACT_MODES:
                digest = await redis.get(keys.document_note(REPORT, extract, url))
                if digest is not None:
                    await redis.delete(keys.document(digest.decode()))
        await rounds("from the archive alone (kept documents deleted)")


async def reduced_corpus(count: int) -> str:
    """The text of ``count`` corpus pages as the reader gives it (what the matcher reads)."""
    texts = []
    for path in sorted(CORPUS.glob("*.gz"))[:count]:
        document = await build_document(
            gzip.decompress(path.read_bytes()),
            "text/html",
            "https://example.org/",
            extract="full",
            max_chars=4_000_000,
            cpu_budget_s=10.0,
            body_truncated=False,
        )
        texts.append(document.text)
    return "\n\n".join(texts)


def matcher_alone() -> None:
    """The matcher's time on growing documents (per M chars: flat when linear) and on a document
    built to make a naive search quadratic (one letter repeated, a quote of it failing at its end).
    Each match of a quote that is not on the page folds the document both ways."""
    base = asyncio.run(reduced_corpus(40))
    quote = "the quick brown fox jumps over the lazy dog 1234"  # in none of them: the whole text is read
    print("matcher alone (fold once, then one quote not on the page):")
    for size in (250_000, 1_000_000, 4_000_000):
        text = (base * (size // len(base) + 1))[:size]
        started = time.perf_counter()
        Document(text).match(quote)
        took = time.perf_counter() - started
        print(per_m("", size, took))
    for size in (250_000, 1_000_000, 4_000_000):
        text = "a " * (size // 2)
        adversarial = "a " * 500 + "b ... " + "a " * 500 + "b"
        started = time.perf_counter()
        Document(text).match(adversarial)
        took = time.perf_counter() - started
        print(per_m("adversarial ", size, took))


def main() -> None:
    if not CORPUS.is_dir():
        raise SystemExit(f"the corpus is not at {CORPUS}")
    pages = [gzip.decompress(p.read_bytes()) for p in sorted(CORPUS.glob("*.gz"))[:CANDIDATES]]
    with tempfile.TemporaryDirectory() as tmp:
        bundle = write_test_ca(Path(tmp))
        redis = private_redis()
        queue = "bench:verify"
        env = {
            "REDIS_URL": redis.url,
            "RESEARCH_QUEUE": queue,
            "RESEARCH_GUARDIAN_ALLOW_CIDRS": "127.0.0.1/32",
            "RESEARCH_CA_BUNDLE": str(bundle),
            "RESEARCH_URL_MENU": "off",
            "RESEARCH_LOG_LEVEL": "WARNING",
            "RESEARCH_CACHE_TTL_S": "0",
            "RESEARCH_FETCH_BUDGET": "1000",
            "RESEARCH_ARCHIVE": str(Path(tmp) / "archive"),
        }
        worker = start_module("worker.cli", env, args=["run"])
        try:
            wait_for_health(redis.url, queue, 1)

            async def both() -> None:
                runner, port = await serve(pages, Path(tmp))
                try:
                    await run(redis.url, queue, port)
                finally:
                    await runner.cleanup()

            asyncio.run(both())
        finally:
            stop(worker)
            redis.stop()
    matcher_alone()


if __name__ == "__main__":
    main()
