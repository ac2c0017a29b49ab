"""Citations end to end: a report fetches an HTML page and a PDF from a local TLS server, then a
dossier of true, reformatted, elided, altered and fabricated quotes is checked, first against the
kept documents, then with the kept documents deleted, from the archive alone, without a connection
to anything but Redis. The oracle of each true quote's place is the text the fetch itself returned."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import json
import re
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
from aiohttp import web

from jobs.output_schemas import output_schema
from tests.support.archive import read_records
from tests.support.fake_dns import FakeResolver
from tests.support.fetching import fetch_settings
from tests.support.pdfs import Page, Text, build_pdf
from tests.support.processes import settings_env
from tests.support.run_cli import run_cli
from tests.support.tls import TestCA, TlsServer, serve
from tests.support.workers import running_worker
from worker.archive.ids import file_key
from worker.client import ResearchClient
from worker.config import ArchiveDirectory, Settings
from worker.limits import EXTRACT_MODES
from worker.settings import tools
from worker.state import keys

PARAGRAPHS = [
    "The harbour authority said on 7 March that \u201cthe seawall is not safe\u201d \u2014 a finding the "
    "council disputes.",
    "Revenue rose 12.5 percent to 4,210 million, the board\u2019s annual filing shows.",
    "Inspectors counted 37 cracks in the northern section and 9 in the southern one.",
    "The council\u2019s engineer wrote that repairs can wait until 2027, and that the cost is not known.",
    "Dredging removed 81,000 cubic metres of silt from the inner basin last year.",
]
ARTICLE = (
    "<html><head><title>Harbour</title></head><body><article><h1>Harbour report</h1>"
    + "".join(f"<p>{p}</p>" for p in PARAGRAPHS)
    + "</article></body></html>"
).encode()
PDF_LINES = [
    ["Annual filing of the harbour board.", "Total dredging cost was 3,400 thousand euros."],
    [
        "The inspectors found the infor-",
        "mation incomplete in 2024.",
        "Seawall repairs are not scheduled before 2027.",
    ],
    ["Signed by the board secretary on 12 May."],
]
PDF = build_pdf([Page([Text(72, 700 - 16 * n, line) for n, line in enumerate(lines)]) for lines in PDF_LINES])
FABRICATED = [
    "The harbour authority declared the seawall safe in 2025.",
    "Revenue fell 3 percent after the storm.",
    "The board resigned over the dredging contract.",
]


@dataclasses.dataclass
class Served:
    server: TlsServer
    hits: list[str]


@contextlib.asynccontextmanager
async def site(ca: TestCA) -> AsyncIterator[Served]:
    hits: list[str] = []

    def answer(body: bytes, content_type: str, *, gzipped: bool = False) -> Any:
        async def handler(request: web.Request) -> web.Response:
            hits.append(request.path)
            if gzipped:  # archived as it came: the archive path must undo the coding as the fetch did
                return web.Response(
                    body=gzip.compress(body),
                    headers={"Content-Type": content_type, "Content-Encoding": "gzip"},
                )
            return web.Response(body=body, content_type=content_type)

        return handler

    routes = {
        "/article": answer(ARTICLE, "text/html", gzipped=True),
        "/filing.pdf": answer(PDF, "application/pdf"),
        "/never": answer(ARTICLE, "text/html"),
    }
    async with serve(routes, ca.server_context()) as server:
        yield Served(server, hits)


@contextlib.asynccontextmanager
async def worker_and_client(settings: Settings, token: str) -> AsyncIterator[ResearchClient]:
    async with (
        running_worker(settings, list(tools(FakeResolver({})))),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=60) as client,
    ):
        yield client


def sentences(text: str) -> list[str]:
    """The oracle's sentences: what lies between full stops, as the fetched text writes it."""
    return [s.strip() for s in re.findall(r"[^.\n]+(?:\.\d[^.\n]*)*\.", text) if len(s.split()) >= 4]


@dataclasses.dataclass(frozen=True)
class Case:
    kind: str
    url: str
    quote: str
    offset: int | None = None  # where a true quote starts in the fetched text (format "text")
    page: int | None = None


def dossier(url: str, text: str, page_offsets: list[int] | None) -> list[Case]:
    """Every sentence of the fetched text, true and reformatted and elided, and altered."""

    def page(at: int) -> int | None:
        return None if page_offsets is None else sum(1 for p in page_offsets if p <= at)

    cases = []
    for sentence in sentences(text):
        at = text.index(sentence)
        words = sentence.split()
        plain = (
            sentence.replace("\u201c", '"')
            .replace("\u201d", '"')
            .replace("\u2019", "'")
            .replace("\u2014", "-")
            .replace("\ufffe", "")  # where PDFium says a word was hyphenated at a line's end
        )
        cases += [
            Case("true", url, sentence, at, page(at)),
            Case("reformatted", url, "  ".join(plain.upper().split()), at, page(at)),
            Case("reformatted", url, "\n".join(" ".join(sentence.split()).split(" ")), at, page(at)),
            Case("elided", url, " ".join(words[:2]) + " \u2026 " + " ".join(words[-2:]), at, page(at)),
        ]
        numbers = [w for w in words if any(ch.isdigit() for ch in w)]
        if numbers:
            number = numbers[0]
            digit = next(ch for ch in number if ch.isdigit())
            changed = number.replace(digit, str((int(digit) + 1) % 10), 1)
            cases.append(Case("altered", url, sentence.replace(number, changed, 1)))
        if " not " in sentence:
            cases.append(Case("altered", url, sentence.replace(" not ", " ", 1)))
        longest = max((w for w in words if w.isalpha()), key=len)
        cases.append(Case("altered", url, sentence.replace(longest, "zebra", 1)))
    cases += [Case("fabricated", url, quote) for quote in FABRICATED]
    return cases


def judge(cases: list[Case], answer: dict[str, Any], source: str) -> dict[str, int]:
    """The dossier's figures; every true quote must be found where it is, nothing false found."""
    assert answer["checked"] == len(cases)
    assert sum(answer[s] for s in ("verified", "approximate", "not_found", "not_fetched")) == len(cases)
    figures = {"true": 0, "found": 0, "right_offset": 0, "right_page": 0, "false": 0, "false_verified": 0}
    for case, citation in zip(cases, answer["citations"], strict=True):
        assert (citation["url"], citation["quote"]) == (case.url, case.quote)
        if case.offset is None:
            figures["false"] += 1
            figures["false_verified"] += citation["status"] != "not_found"
            continue
        figures["true"] += 1
        figures["found"] += citation["status"] in ("verified", "approximate")
        figures["right_offset"] += citation.get("offset") == case.offset and citation.get("format") == "text"
        figures["right_page"] += citation.get("page") == case.page
        assert citation["source"] == source
        if case.kind == "true":
            assert citation["status"] == "verified", (case, citation)
        if case.kind == "reformatted" and case.quote.isupper():
            assert citation["status"] == "approximate", (case, citation)
    assert figures["found"] == figures["right_offset"] == figures["right_page"] == figures["true"], figures
    assert figures["false_verified"] == 0, figures
    return figures


@contextlib.contextmanager
def connections() -> Iterator[list[tuple[int, Any]]]:
    """Every socket connect made while inside (asyncio connects through socket.connect too)."""
    made: list[tuple[int, Any]] = []
    real = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> None:
        made.append((self.family, address))
        real(self, address)

    socket.socket.connect = connect  # type: ignore[method-assign]
    try:
        yield made
    finally:
        socket.socket.connect = real  # type: ignore[method-assign]


async def test_a_dossier_is_checked_from_kept_documents_then_from_the_archive_alone(
    settings: Settings, ca: TestCA, token: str, report: str, redis: Any, tmp_path: Path
) -> None:
    s = fetch_settings(settings, ca, archive=ArchiveDirectory(str(tmp_path / "archive")))
    async with site(ca) as served, worker_and_client(s, token) as client:
        article = served.server.url("/article")
        filing = served.server.url("/filing.pdf")
        fetched = {url: await client.fetch(report, url, format="text") for url in (article, filing)}
        cases: list[Case] = []
        for url, result in fetched.items():
            assert result["ok"] and result["next_offset"] is None and result["archived"], result
            cases += dossier(url, result["text"], result.get("page_offsets"))
        assert any(c.page == 2 for c in cases)  # the PDF's second page is cited by its number
        cases.append(Case("never fetched", served.server.url("/never"), "Harbour report"))
        citations = [{"url": c.url, "quote": c.quote} for c in cases]

        kept = await client.verify(report, citations)
        assert kept["report_id"] == report and kept["not_fetched"] == 1
        print("kept documents:", judge(cases[:-1], {**kept, **_without_last(kept)}, "kept"))
        for citation, url in ((kept["citations"][0], article), (kept["citations"][-2], filing)):
            if citation["status"] != "not_found":
                assert citation["sha256"] == fetched[url]["sha256"]
                assert citation["archive_record"] == fetched[url]["archive_record"]
                assert citation["fetched_at"] == fetched[url]["fetched_at"]

        # The kept documents deleted: the archive alone, and nothing but Redis reached.
        for url in (article, filing):
            for extract in EXTRACT_MODES:
                digest = await redis.get(keys.document_note(report, extract, url))
                if digest is not None:
                    await redis.delete(keys.document(digest.decode()))
        hits_before = len(served.hits)
        with connections() as made:
            archived = await client.verify(report, citations)
        assert len(served.hits) == hits_before
        redis_port = urlsplit(s.redis_url or "").port
        inet = [a for family, a in made if family in (socket.AF_INET, socket.AF_INET6)]
        assert all(address[1] == redis_port for address in inet), inet
        print("archive alone:", judge(cases[:-1], {**archived, **_without_last(archived)}, "archive"))
        first = archived["citations"][0]
        assert first["archive_record"] == fetched[article]["archive_record"]
        assert first["sha256"] == fetched[article]["sha256"]

        # Another report fetched the PDF again: its record is a revisit of the first (the same
        # payload, stored once), and its citations read the original's payload.
        other = f"{report}-again"
        again = await client.fetch(other, filing, format="text", fresh=True)
        assert again["ok"] and again["archive_record"] != fetched[filing]["archive_record"]
        stored = (tmp_path / "archive" / file_key(again["archive_record"])).read_bytes()
        # A warcinfo opens every stored file (issue 37), then the revisit.
        assert [r.type for r in read_records(stored)][:2] == ["warcinfo", "revisit"]
        for extract in EXTRACT_MODES:
            digest = await redis.get(keys.document_note(other, extract, filing))
            if digest is not None:
                await redis.delete(keys.document(digest.decode()))
        pdf_cases = [c for c in cases if c.url == filing]
        revisited = await client.verify(other, [{"url": c.url, "quote": c.quote} for c in pdf_cases])
        judge(pdf_cases, revisited, "archive")
        assert {c.get("archive_record") for c in revisited["citations"]} - {None} == {again["archive_record"]}


def _without_last(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer less its last citation (the URL never fetched), with the counts to match."""
    last = answer["citations"][-1]
    assert last["status"] == "not_fetched" and "offset" not in last
    return {
        "checked": answer["checked"] - 1,
        "not_fetched": answer["not_fetched"] - 1,
        "citations": answer["citations"][:-1],
    }


async def test_cite_is_a_free_read_only_tool_for_the_agent(
    settings: Settings, ca: TestCA, token: str, report: str, redis: Any
) -> None:
    s = fetch_settings(settings, ca, fetch_budget=1)
    async with site(ca) as served, worker_and_client(s, token) as client:
        article = served.server.url("/article")
        assert (await client.fetch(report, article))["ok"]
        hits = len(served.hits)
        quote = "Revenue rose 12.5 percent to 4,210 million"
        answer = json.loads(await client.call("cite", {"url": article, "quote": quote}, report_id=report))
        assert (answer["ok"], answer["tool"], answer["status"]) == (True, "cite", "verified")
        assert answer["matched_text"] == quote and answer["format"] == "text"
        assert answer["context"].find(quote) == answer["offset"] - max(0, answer["offset"] - 200)
        wrong = json.loads(
            await client.call(
                "cite", {"url": article, "quote": "Revenue rose 13.5 percent"}, report_id=report
            )
        )
        assert (wrong["ok"], wrong["status"]) == (True, "not_found")
        unseen = json.loads(
            await client.call("cite", {"url": served.server.url("/never"), "quote": "x y"}, report_id=report)
        )
        assert unseen["status"] == "not_fetched"
        # Charged nothing: the report's one fetch is spent, yet cite goes on answering.
        again = await client.fetch(report, served.server.url("/never"))
        assert again["error"]["kind"] == "budget_exhausted"
        assert json.loads(await client.call("cite", {"url": article, "quote": quote}, report_id=report))["ok"]
        assert len(served.hits) == hits
        bad = json.loads(await client.call("cite", {"url": article}, report_id=report))
        assert (bad["ok"], bad["error"]["kind"]) == (False, "invalid_request")
        blocks = await client.call(
            "cite", {"url": article, "quote": quote}, report_id=report, shape="anthropic"
        )
        assert blocks[0]["type"] == "text" and json.loads(blocks[0]["text"])["status"] == "verified"


async def test_research_worker_verify_prints_the_object_and_exits_by_it(
    settings: Settings, ca: TestCA, token: str, report: str, tmp_path: Path
) -> None:
    s = fetch_settings(settings, ca)
    async with site(ca) as served, worker_and_client(s, token) as client:
        article = served.server.url("/article")
        assert (await client.fetch(report, article))["ok"]
        good = [
            {"url": article, "quote": "Inspectors counted 37 cracks"},
            {"url": article, "quote": "REVENUE ROSE"},
        ]
        path = tmp_path / "dossier.json"
        path.write_text(json.dumps(good))
        env = settings_env(s)
        done = await asyncio.to_thread(run_cli, "verify", report, str(path), env=env)
        assert done.returncode == 0, done.stderr
        printed = json.loads(done.stdout)
        assert (printed["checked"], printed["verified"], printed["approximate"]) == (2, 1, 1)
        assert set(printed) == {
            "report_id",
            "checked",
            "verified",
            "approximate",
            "not_found",
            "not_fetched",
            "citations",
        }
        bad = [*good, {"url": article, "quote": "Inspectors counted 38 cracks"}]
        stdin = await asyncio.to_thread(_run_cli_stdin, json.dumps(bad), report, env)
        assert stdin.returncode == 1 and json.loads(stdin.stdout)["not_found"] == 1
        assert "1 of 3 citations" in stdin.stderr
        path.write_text('{"url": "not a list"}')
        refused = await asyncio.to_thread(run_cli, "verify", report, str(path), env=env)
        assert refused.returncode == 2 and "JSON list" in refused.stderr


def _run_cli_stdin(text: str, report: str, env: dict[str, str]) -> Any:
    import subprocess
    import sys

    from tests.support.run_cli import ROOT

    return subprocess.run(
        [sys.executable, "-m", "tests.support.run_cli", "verify", report, "-"],
        cwd=ROOT,
        env=env,
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("citations", "message"),
    [
        ("not a list", "citations must be a list"),
        ([{"url": "https://example.org/"}], "citation 0: quote must be a non-empty string"),
        ([{"url": "https://example.org/", "quote": "x", "page": 2}], "takes only url and quote"),
        ([{"url": "https://example.org/", "quote": "x" * 10_001}], "longer than 10,000"),
        ([{"url": "https://example.org/", "quote": "a ... " * 21 + "b"}], "more than 20 parts"),
    ],
)
async def test_a_bad_dossier_is_an_invalid_request(
    settings: Settings, ca: TestCA, token: str, report: str, citations: Any, message: str
) -> None:
    async with worker_and_client(fetch_settings(settings, ca), token) as client:
        answer = await client.run("verify_citations", {"report_id": report, "citations": citations})
    assert (answer["ok"], answer["error"]["kind"]) == (False, "invalid_request")
    assert message in answer["error"]["message"]


async def test_cite_over_mcp_is_listed_and_answers_with_its_output_schema(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    from tests.test_mcp_stdio import stdio_session

    s = fetch_settings(settings, ca, result_ttl_s=60)  # the server's job ids carry no test token
    async with (
        site(ca) as served,
        running_worker(s, list(tools(FakeResolver({})))),
        stdio_session(s, "--report", report) as client,
    ):
        listed = await client.list_tools()
        article = served.server.url("/article")
        fetched = await client.call_tool("fetch_page", {"url": article})
        checked = await client.call_tool("cite", {"url": article, "quote": "revenue rose 12.5 PERCENT"})
        missing = await client.call_tool("cite", {"url": article})
    listing = {t.name: t for t in listed.tools}
    assert listing["cite"].model_dump(by_alias=True)["annotations"]["openWorldHint"] is False
    assert not fetched.is_error
    answer = checked.structured_content
    assert answer is not None and not checked.is_error
    jsonschema.Draft202012Validator(output_schema("cite")).validate(answer)
    assert (answer["tool"], answer["status"], answer["report_id"]) == ("cite", "approximate", report)
    assert answer["matched_text"] == "Revenue rose 12.5 percent"
    assert missing.is_error and missing.structured_content["error"]["kind"] == "invalid_request"
