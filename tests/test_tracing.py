"""Trace context through a job: the traceparent's grammar, the phase log, and a real export.

The end-to-end tests run a worker that exports to a real OTLP/HTTP receiver on loopback and decode
what arrives: the job's span must be the child of the orchestrator's span, its phases its children.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import string
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import html5lib
import pytest
import redis.asyncio as aioredis
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import use_span

from jobs.fetch.tool import FetchPageTool
from tests.support.fake_dns import FakeResolver
from tests.support.fake_openrouter import KEY, completion, fake_openrouter, url_citation
from tests.support.fetching import fetch_settings, fetching
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver
from tests.support.tls import TestCA, serve
from tests.support.workers import running_worker
from tests.test_dashboard import get, serving, text_of
from tests.test_mcp_stdio import stdio_session
from tests.test_search import searching
from worker.client import ClientError, ResearchClient, SyncResearchClient
from worker.config import ConfigError, Secret, Settings
from worker.serialization import dumps
from worker.state import keys
from worker.state.redis_conn import connect
from worker.tracing import phases
from worker.tracing.context import TRACEPARENT, current_traceparent, parse_traceparent

HEX = "0123456789abcdef"
# The specification's grammar for version 00, written out independently of the parser under test.
SPEC = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")


def hex_text(size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=HEX, min_size=size, max_size=size)


@given(hex_text(32), hex_text(16), hex_text(2))
def test_a_well_formed_traceparent_is_kept_exactly_when_the_specification_allows_it(
    trace_id: str, parent_id: str, flags: str
) -> None:
    value = f"00-{trace_id}-{parent_id}-{flags}"
    expected = value if SPEC.fullmatch(value) else None
    assert parse_traceparent(value) == expected


@given(st.text(alphabet=string.printable, max_size=80))
def test_any_other_text_is_ignored_unless_it_is_a_version_00_traceparent(value: str) -> None:
    assert parse_traceparent(value) == (value if SPEC.fullmatch(value) else None)


@pytest.mark.parametrize(
    "value",
    [
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",  # uppercase is not the grammar
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # all-zero parent id
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # the forbidden version
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  # version 00 has no tail
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "",
    ],
)
def test_a_malformed_traceparent_is_ignored(value: str) -> None:
    assert parse_traceparent(value) is None


@pytest.mark.parametrize("value", [None, 7, ["00"], {"traceparent": "x"}, b"00-" + b"a" * 52])
def test_a_traceparent_of_the_wrong_type_is_ignored(value: object) -> None:
    assert parse_traceparent(value) is None


def test_a_later_version_is_read_by_its_first_fields() -> None:
    later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-later"
    assert parse_traceparent(later) == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_the_current_span_of_the_caller_is_its_traceparent() -> None:
    tracer = TracerProvider().get_tracer("orchestrator")
    assert current_traceparent() is None
    span = tracer.start_span("orchestrate")
    with use_span(span, end_on_exit=True):
        context = span.get_span_context()
        flags = int(context.trace_flags)
        assert current_traceparent() == f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"
    assert current_traceparent() is None


def test_a_phase_outside_a_job_is_not_kept_and_inside_one_is() -> None:
    with phases.phase(phases.REDUCE):
        pass
    log, token = phases.open_log()
    try:
        with phases.phase(phases.REDUCE):
            pass
        phases.record(phases.ARCHIVE, 5, 3)  # an end before its start is clamped, not negative
    finally:
        phases.close_log(token)
    with phases.phase(phases.BODY):
        pass
    assert [p.name for p in log.phases] == [phases.REDUCE, phases.ARCHIVE]
    assert log.phases[1].duration_ms == 0
    assert phases.current() is None


async def test_tasks_a_job_starts_report_into_its_log() -> None:
    log, token = phases.open_log()
    try:

        async def child() -> None:
            with phases.phase(phases.OCR):
                await asyncio.sleep(0)

        await asyncio.gather(asyncio.create_task(child()), asyncio.create_task(child()))
    finally:
        phases.close_log(token)
    assert [p.name for p in log.phases] == [phases.OCR, phases.OCR]


def test_a_job_that_loops_keeps_its_first_phases_and_counts_the_rest() -> None:
    log = phases.PhaseLog()
    for i in range(phases.MAX_PHASES + 5):
        log.add(phases.CONNECT, i, i + 1)
    assert len(log.phases) == phases.MAX_PHASES and log.dropped == 5


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "http://collector:4318/v1/traces"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}, "http://collector:4318/v1/traces"),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example/otlp",
            },
            "https://traces.example/otlp",
        ),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"}, None),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "console, otlp"},
            "http://collector:4318/v1/traces",
        ),
    ],
)
def test_the_standard_variables_choose_where_spans_go(env: dict[str, str], expected: str | None) -> None:
    assert Settings.from_env(env).otel_traces_endpoint == expected


def test_an_endpoint_that_is_not_http_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_ENDPOINT"):
        Settings.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "grpc://collector:4317"})


async def page(request: web.Request) -> web.Response:
    return web.Response(
        text="<html><title>Traced</title><p>A page worth tracing.</p></html>", content_type="text/html"
    )


NETWORK_PHASES = {phases.DNS_AND_GUARDIAN, phases.CONNECT, phases.TLS, phases.FIRST_BYTE}
FETCH_PHASES = NETWORK_PHASES | {phases.QUEUE_WAIT, phases.MENU_AND_BUDGET, phases.BODY, phases.REDUCE}


async def test_a_fetch_enqueued_with_a_traceparent_is_a_child_span_with_its_phases(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    orchestrator = TracerProvider().get_tracer("orchestrator").start_span("write dossier")
    context = orchestrator.get_span_context()
    traceparent = f"00-{context.trace_id:032x}-{context.span_id:016x}-01"
    async with otlp_receiver() as receiver, serve({"/": page}, ca.server_context()) as server:
        traced = fetch_settings(settings, ca, otel_traces_endpoint=receiver.url + "/v1/traces")
        resolver = FakeResolver({"traced.site.test": ["127.0.0.1"]})
        async with fetching(traced, token, report, resolver) as harness:
            pool = await connect(traced)
            try:
                job = await pool.enqueue_job(
                    "fetch_page",
                    report_id=report,
                    url=server.url("/?secret=1", name="traced.site.test"),
                    traceparent=traceparent,
                    _job_id=f"{token}-traced",
                    _queue_name=traced.queue_name,
                )
                assert job is not None
                result = await harness.client.wait(f"{token}-traced")
            finally:
                await pool.aclose()
            assert result["ok"] is True, result.get("error")
            job_span = await receiver.wait_for("fetch_page")
            assert job_span.trace_id == f"{context.trace_id:032x}"
            assert job_span.parent_span_id == f"{context.span_id:016x}"
            for _ in range(100):  # the phases are exported in the same batch or the next
                children = {s.name for s in receiver.children_of(job_span)}
                if children >= FETCH_PHASES:
                    break
                await asyncio.sleep(0.1)
            assert children >= FETCH_PHASES, children
            assert job_span.attributes["server.address"] == "traced.site.test"
            assert job_span.attributes["research.report_id"] == report
            assert job_span.attributes["http.response.status_code"] == 200
            assert job_span.resource["service.name"] == "research-worker"
            # Nothing of the URL but its host, and no page text, anywhere in what was sent.
            everything = repr([(s.name, s.attributes, s.resource) for s in receiver.spans])
            assert "secret" not in everything and "worth tracing" not in everything
            for child in receiver.children_of(job_span):
                assert job_span.start_ns <= child.start_ns <= child.end_ns <= job_span.end_ns, child.name


async def test_a_malformed_traceparent_still_runs_the_job_as_a_root_span(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async with otlp_receiver() as receiver, serve({"/": page}, ca.server_context()) as server:
        traced = fetch_settings(settings, ca, otel_traces_endpoint=receiver.url + "/v1/traces")
        async with fetching(
            traced, token, report, FakeResolver({"traced.site.test": ["127.0.0.1"]})
        ) as harness:
            pool = await connect(traced)
            try:
                await pool.enqueue_job(
                    "fetch_page",
                    report_id=report,
                    url=server.url("/", name="traced.site.test"),
                    traceparent="not-a-traceparent" * 100,
                    _job_id=f"{token}-untraced",
                    _queue_name=traced.queue_name,
                )
                result = await harness.client.wait(f"{token}-untraced")
            finally:
                await pool.aclose()
            assert result["ok"] is True, result.get("error")
            job_span = await receiver.wait_for("fetch_page")
            assert job_span.parent_span_id == ""


def test_with_no_endpoint_the_worker_imports_nothing_of_the_sdk() -> None:
    probe = (
        "import sys\n"
        "import worker.settings, worker.runtime.worker\n"
        "from worker.tracing.export import Tracing\n"
        "off = Tracing(None)\n"
        "assert not off.enabled\n"
        "assert off.start_job(tool='t', job_id='j', traceparent=None, enqueued_ns=1, started_ns=2) is None\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"


def traced_dns() -> FakeResolver:
    return FakeResolver({"traced.site.test": ["127.0.0.1"]})


def plain_dns() -> FakeResolver:
    return FakeResolver({"plain.site.test": ["127.0.0.1"]})


def phase_rows_of(shown: str) -> list[Any]:
    return list(
        html5lib.parse(shown, namespaceHTMLElements=False).findall(".//section[@id='job-phases']//tbody/tr")
    )


async def test_the_job_page_shows_the_phases_the_worker_measured(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    async with serve({"/": page}, ca.server_context()) as server:
        plain = fetch_settings(settings, ca)
        async with (
            fetching(plain, token, report, plain_dns()) as harness,
            serving(plain) as base,
        ):
            result = await harness.fetch(server.url("/", name="plain.site.test"))
            assert result["ok"] is True
            _, _, shown = await get(f"{base}/job/{result['job_id']}")
    table = text_of(shown, "job-phases")
    for name in NETWORK_PHASES:
        assert name in table, name
    # Each row's duration is a figure in milliseconds, as the rest of the page writes them.
    rows = html5lib.parse(shown, namespaceHTMLElements=False).findall(
        ".//section[@id='job-phases']//tbody/tr"
    )
    assert len(rows) >= len(NETWORK_PHASES)
    for row in rows:
        cells = ["".join(cell.itertext()).strip() for cell in row.findall("td")]
        assert cells[1].startswith("+") and cells[1].endswith(" ms") and cells[2].endswith(" ms"), cells
    # The dashboard's CSP allows no inline style: the bars are SVG geometry, inside the time line.
    root = html5lib.parse(shown, namespaceHTMLElements=False)
    assert [element.tag for element in root.iter() if "style" in element.attrib] == []
    (section,) = root.findall(".//section[@id='job-phases']")
    bars = [element for element in section.iter() if str(element.tag).endswith("}rect")]
    assert len(bars) == len(rows)
    for bar in bars:
        assert float(bar.attrib["x"]) >= 0 and float(bar.attrib["x"]) + float(bar.attrib["width"]) <= 100.6


async def test_malformed_phases_on_a_line_are_left_out_and_names_escaped(
    settings: Settings, redis: aioredis.Redis, token: str
) -> None:
    job_id = f"{token}-hostile-phases"
    line = {
        "job_id": job_id,
        "tool": "fetch_page",
        "report_id": "r",
        "outcome": "ok",
        "target": "https://example.test/",
        "at": 1.0,
        "duration_ms": 5.0,
        "phases": [
            ["<script>alert(1)</script>", 0, 1],
            ["negative", 0, -4],
            ["not a number", "x", 1],
            "not a row",
            ["too", "many", 1, 2],
        ],
    }
    await redis.lpush(keys.recent(settings.queue_name), dumps(line))
    async with serving(settings) as base:
        _, _, shown = await get(f"{base}/job/{job_id}")
    rows = html5lib.parse(shown, namespaceHTMLElements=False).findall(
        ".//section[@id='job-phases']//tbody/tr"
    )
    assert ["".join(row.find("td").itertext()) for row in rows] == ["<script>alert(1)</script>"]
    assert "<script>alert(1)" not in shown


EXPLICIT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def job_span_under(receiver: OtlpReceiver, parent_trace: int, parent_span: int) -> ReceivedSpan:
    span = await receiver.wait_for("fetch_page")
    assert span.trace_id == f"{parent_trace:032x}" and span.parent_span_id == f"{parent_span:016x}"
    return span


async def test_a_fetch_inside_the_orchestrators_span_joins_its_trace(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    orchestrator = TracerProvider().get_tracer("orchestrator")
    async with otlp_receiver() as receiver, serve({"/": page}, ca.server_context()) as server:
        traced = fetch_settings(settings, ca, otel_traces_endpoint=receiver.url + "/v1/traces")
        async with fetching(traced, token, report, traced_dns()) as harness:
            span = orchestrator.start_span("read the annual report")
            with use_span(span, end_on_exit=True):
                result = await harness.client.fetch(report, server.url("/", name="traced.site.test"))
            assert result["ok"] is True
            context = span.get_span_context()
            await job_span_under(receiver, context.trace_id, context.span_id)


async def test_an_explicit_trace_parent_wins_over_the_current_span(
    settings: Settings, ca: TestCA, token: str, report: str
) -> None:
    explicit = EXPLICIT
    async with otlp_receiver() as receiver, serve({"/": page}, ca.server_context()) as server:
        traced = fetch_settings(settings, ca, otel_traces_endpoint=receiver.url + "/v1/traces")
        async with fetching(traced, token, report, traced_dns()) as harness:
            other = TracerProvider().get_tracer("elsewhere").start_span("unrelated")
            with use_span(other, end_on_exit=True):
                result = await harness.client.fetch(
                    report, server.url("/", name="traced.site.test"), trace_parent=explicit
                )
            assert result["ok"] is True
            await job_span_under(receiver, 0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331)


async def test_a_malformed_trace_parent_is_the_callers_error_and_nothing_is_enqueued(
    settings: Settings, token: str, report: str
) -> None:
    async with ResearchClient(settings=settings, job_id_prefix=f"{token}-", require_worker=False) as client:
        with pytest.raises(ClientError, match="traceparent"):
            await client.fetch(report, "https://example.test/", trace_parent="00-xyz")
        assert await client.redis.zcard(settings.queue_name) == 0


async def test_a_model_may_not_set_the_trace(settings: Settings, token: str, report: str) -> None:
    async with ResearchClient(settings=settings, job_id_prefix=f"{token}-", require_worker=False) as client:
        result = await client.call_result(
            "fetch_page",
            {
                "url": "https://example.test/",
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            },
            report_id=report,
        )
        assert result["ok"] is False and result["error"]["kind"] == "invalid_request"  # type: ignore[index]
        assert "traceparent" in result["error"]["message"]  # type: ignore[index]
        assert await client.redis.zcard(settings.queue_name) == 0


def test_the_blocking_client_carries_the_callers_span(settings: Settings, token: str, report: str) -> None:
    captured: list[object] = []

    async def enqueue(
        self: object, function: str, kwargs: Mapping[str, object], job_id: str | None = None
    ) -> str:
        captured.append(kwargs.get("traceparent"))
        raise ClientError("stop here")

    span = TracerProvider().get_tracer("script").start_span("notebook cell")
    context = span.get_span_context()
    with SyncResearchClient(settings=settings, require_worker=False) as client:
        original = ResearchClient.enqueue
        ResearchClient.enqueue = enqueue  # type: ignore[method-assign,assignment]
        try:
            with use_span(span, end_on_exit=True), pytest.raises(ClientError, match="stop here"):
                client.fetch(report, "https://example.test/")
        finally:
            ResearchClient.enqueue = original  # type: ignore[method-assign]
    assert captured == [f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"]


async def test_a_search_is_a_span_with_its_provider_phase_and_no_query_text(
    settings: Settings, token: str, report: str
) -> None:
    async with otlp_receiver() as receiver, fake_openrouter() as fake:
        fake.will(completion([url_citation("https://example.org/a", "First", "About A.")]))
        traced = dataclasses.replace(
            settings,
            openrouter_base_url=fake.base_url,
            openrouter_api_key=Secret(KEY),
            otel_traces_endpoint=receiver.url + "/v1/traces",
        )
        async with searching(traced, token) as (_, client):
            result = await client.search(report, "the secret merger of ACME", trace_parent=EXPLICIT)
        assert result["ok"] is True, result.get("error")
        span = await receiver.wait_for("web_search")
        assert span.parent_span_id == EXPLICIT.split("-")[2]
        for _ in range(100):
            if phases.SEARCH_PROVIDER in {s.name for s in receiver.children_of(span)}:
                break
            await asyncio.sleep(0.1)
        assert phases.SEARCH_PROVIDER in {s.name for s in receiver.children_of(span)}
        assert span.attributes["research.results"] == 1
        everything = repr([(s.name, s.attributes, s.resource) for s in receiver.spans])
        assert "merger" not in everything and KEY not in everything


async def test_an_mcp_call_carries_its_meta_traceparent_to_the_jobs_span(
    settings: Settings, ca: TestCA, report: str
) -> None:
    async with otlp_receiver() as receiver, serve({"/": page}, ca.server_context()) as site:
        traced = fetch_settings(
            settings, ca, result_ttl_s=60, otel_traces_endpoint=receiver.url + "/v1/traces"
        )
        async with (
            running_worker(traced, [FetchPageTool(FakeResolver({}))]),
            stdio_session(
                dataclasses.replace(traced, otel_traces_endpoint=None), "--report", report
            ) as client,
        ):
            answer = await client.call_tool(
                "fetch_page", {"url": site.url("/")}, meta={TRACEPARENT: EXPLICIT}
            )
            malformed = await client.call_tool(
                "fetch_page", {"url": site.url("/")}, meta={TRACEPARENT: "junk"}
            )
        assert answer.is_error is False and malformed.is_error is False
        await job_span_under(receiver, 0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331)
