"""A worker's /metrics: the named series, with their labels, after real jobs."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from collections.abc import Callable

import aiohttp
import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from tests.support.tools import TEST_TOOLS
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import Settings
from worker.metrics import UNKNOWN_TOOL, Metrics
from worker.state import keys

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def scrape(port: int) -> tuple[str, Samples]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    samples = {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    return text, samples


async def scrape_until(port: int, settled: Callable[[Samples], bool], what: str) -> tuple[str, Samples]:
    """Scrape until ``settled`` holds.

    A client wakes on the result write, a moment before the worker counts the job and leaves it,
    so the series trail the result by a few event-loop turns.
    """
    deadline = time.monotonic() + 5
    while True:
        text, samples = await scrape(port)
        if settled(samples):
            return text, samples
        assert time.monotonic() < deadline, f"the metrics never showed {what}"
        await asyncio.sleep(0.01)


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def label_sets(samples: Samples, name: str) -> set[frozenset[tuple[str, str]]]:
    return {labels for sample_name, labels in samples if sample_name == name}


async def wait_for_beat(redis: aioredis.Redis, settings: Settings) -> None:
    deadline = time.monotonic() + 10
    while not await redis.exists(keys.health(settings.queue_name, settings.worker_id)):
        assert time.monotonic() < deadline, "the worker never wrote its health key"
        await asyncio.sleep(0.02)


async def test_the_metrics_endpoint_serves_the_named_series_with_their_labels_after_a_few_jobs(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    port = _free_port()
    settings = dataclasses.replace(settings, metrics_port=port, fetch_budget=2)
    # A job deferred an hour: the worker leaves it queued, so the depth its first beat samples is 1.
    await redis.zadd(settings.queue_name, {f"{token}-deferred": time.time() * 1000 + 3_600_000})
    async with (
        running_worker(settings, TEST_TOOLS),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client,
    ):
        await wait_for_beat(redis, settings)
        outcomes = [
            (await client.call("echo", {"report_id": report, "value": str(i)}, wait_s=10))["ok"]
            for i in range(3)
        ]
        boom = await client.call("boom", {"report_id": report}, wait_s=10)
        text, samples = await scrape_until(
            port,
            lambda s: (
                value(s, "research_jobs_total", tool="boom", outcome="internal_error") == 1
                and value(s, "research_jobs_in_progress") == 0
            ),
            "the last job counted and finished",
        )
    assert outcomes == [True, True, False]
    assert boom["error"]["kind"] == "internal_error"

    assert value(samples, "research_jobs_total", tool="echo", outcome="ok") == 2
    assert value(samples, "research_jobs_total", tool="echo", outcome="budget_exhausted") == 1
    assert value(samples, "research_jobs_total", tool="boom", outcome="internal_error") == 1
    assert value(samples, "research_budget_refusals_total", tool="fetch") == 1

    assert value(samples, "research_job_duration_seconds_count", tool="echo") == 3
    assert value(samples, "research_job_duration_seconds_bucket", tool="echo", le="+Inf") == 3
    assert len(label_sets(samples, "research_job_duration_seconds_bucket")) > 10
    assert value(samples, "research_queue_wait_seconds_count", tool="echo") == 3
    assert value(samples, "research_queue_wait_seconds_count", tool="boom") == 1

    assert value(samples, "research_jobs_in_progress") == 0
    assert value(samples, "research_queue_depth") == 1
    # Labels are bounded sets: a report id (like a URL) would grow the series without bound.
    assert report not in text
    assert token not in text


async def test_the_in_progress_gauge_counts_a_running_job(
    settings: Settings, token: str, report: str
) -> None:
    port = _free_port()
    settings = dataclasses.replace(settings, metrics_port=port)
    async with (
        running_worker(settings, TEST_TOOLS),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client,
    ):
        job_id = await client.enqueue("slow", {"report_id": report, "seconds": 1.0})
        _, during = await scrape_until(
            port, lambda s: value(s, "research_jobs_in_progress") == 1, "the running job"
        )
        result = await client.wait(job_id, wait_s=10)
        _, after = await scrape_until(
            port, lambda s: value(s, "research_jobs_in_progress") == 0, "the job leaving"
        )
    assert value(during, "research_jobs_total", tool="slow", outcome="ok") is None
    assert result["ok"] is True
    assert value(after, "research_jobs_total", tool="slow", outcome="ok") == 1


async def test_the_metrics_endpoint_serves_process_and_runtime_series_and_no_created_series(
    settings: Settings, token: str, report: str
) -> None:
    port = _free_port()
    settings = dataclasses.replace(settings, metrics_port=port)
    async with (
        running_worker(settings, TEST_TOOLS),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client,
    ):
        await client.call("echo", {"report_id": report, "value": "v"}, wait_s=10)
        text, samples = await scrape_until(
            port,
            lambda s: value(s, "research_jobs_total", tool="echo", outcome="ok") == 1,
            "the job counted",
        )
    # The process the scrape reached: its memory, CPU time and open files, beside the jobs.
    assert (value(samples, "process_resident_memory_bytes") or 0) > 10_000_000
    assert (value(samples, "process_open_fds") or 0) > 0
    assert value(samples, "process_cpu_seconds_total") is not None
    assert value(samples, "python_gc_collections_total", generation="0") is not None
    assert label_sets(samples, "python_info")
    # A counter and a histogram now have children, which is when _created series would appear.
    assert value(samples, "research_job_duration_seconds_count", tool="echo") == 1
    created = [line for line in text.splitlines() if "_created" in line]
    assert created == []


def test_each_worker_registry_has_its_own_process_collector() -> None:
    # Tests (and the benchmarks) run several runtimes in one process: each registry must stand alone.
    first, second = Metrics(), Metrics()
    for metrics in (first, second):
        assert (metrics.registry.get_sample_value("process_resident_memory_bytes") or 0) > 0


def test_refused_payloads_are_counted_from_zero_in_the_jobs_counter() -> None:
    metrics = Metrics()
    labels = {"tool": "unknown", "outcome": "invalid_request"}
    # Present before the first refusal, so an alert on increase() sees the first one.
    assert metrics.registry.get_sample_value("research_jobs_total", labels) == 0
    metrics.jobs.labels(tool=UNKNOWN_TOOL, outcome="invalid_request").inc()
    assert metrics.registry.get_sample_value("research_jobs_total", labels) == 1
    assert metrics.registry.get_sample_value("research_jobs_created", labels) is None


def test_every_research_series_name_ends_in_the_unit_it_measures() -> None:
    # research_fetch_bytes_read was the counter-example: the unit comes last (before _total).
    names = {}
    for family in Metrics().registry.collect():
        if family.name.startswith("research_"):
            names[family.name] = family.type
            words = family.name.split("_")
            for unit in ("seconds", "bytes", "usd"):
                if unit in words:
                    assert words[-1] == unit, family.name
            if family.type == "histogram":
                assert words[-1] in {"seconds", "bytes"}, family.name
    assert names["research_fetch_read_bytes"] == "histogram"
    assert names["research_queue_depth"] == "gauge"  # the HPA's metric keeps its name
