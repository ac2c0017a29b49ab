"""Malformed job payloads written straight into the queue: each gets an invalid_request result, leaves
the queue, is logged once and counted, and never stops the worker (arq's job format: f, a, k, t, et).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from arq.constants import in_progress_key_prefix, job_key_prefix, retry_key_prefix
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.tools import TEST_TOOLS
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import Settings
from worker.runtime.payload import MAX_ENQUEUE_MS, MalformedJob, read_payload
from worker.runtime.worker import ResearchWorker
from worker.serialization import loads
from worker.state import keys

FUNCTIONS = frozenset(tool.name for tool in TEST_TOOLS)
JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


def good_payload(report_id: str = "r-1") -> dict[str, Any]:
    return {"t": None, "f": "echo", "a": [], "k": {"report_id": report_id, "value": "v"}, "et": 1}


def not_a(kind: type | tuple[type, ...]) -> st.SearchStrategy[Any]:
    return JSON_VALUES.filter(lambda v: not isinstance(v, kind))


# Each entry: the field, and values arq would crash on or mishandle there.
BAD_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "f": st.one_of(not_a(str), st.text(max_size=30).filter(lambda name: name not in FUNCTIONS)),
    "a": not_a(list),
    "k": not_a(dict),
    "t": st.one_of(
        JSON_VALUES.filter(lambda v: v is not None and (not isinstance(v, int) or isinstance(v, bool))),
        st.integers(min_value=-(2**63), max_value=-1),
        st.integers(min_value=2**31, max_value=2**63 - 1),
    ),
    "et": st.one_of(
        JSON_VALUES.filter(lambda v: isinstance(v, bool) or not isinstance(v, (int, float))),
        st.integers(max_value=-1, min_value=-(2**63)),
        st.integers(min_value=MAX_ENQUEUE_MS + 1, max_value=2**63 - 1),
        st.floats(min_value=MAX_ENQUEUE_MS * 2, allow_infinity=False),
    ),
}


@st.composite
def malformed_payloads(draw: st.DrawFn) -> bytes:
    shape = draw(st.sampled_from(["field", "missing", "not an object", "not json"]))
    if shape == "not json":
        return draw(st.binary(min_size=1, max_size=40).filter(_not_json))
    if shape == "not an object":
        return orjson.dumps(draw(JSON_VALUES.filter(lambda v: not isinstance(v, dict))))
    payload = good_payload()
    if shape == "missing":
        del payload[draw(st.sampled_from(sorted(payload)))]
    else:
        field = draw(st.sampled_from(sorted(BAD_FIELDS)))
        payload[field] = draw(BAD_FIELDS[field])
    return orjson.dumps(payload)


def _not_json(raw: bytes) -> bool:
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return True
    return False


@given(raw=malformed_payloads())
@settings(max_examples=300, deadline=None)
def test_every_malformed_payload_is_refused_with_a_reason_in_the_workers_words(raw: bytes) -> None:
    with pytest.raises(MalformedJob) as refused:
        read_payload(raw, FUNCTIONS)
    assert refused.value.message.startswith(("the job", "this worker has no job named"))


@given(
    t=st.one_of(st.none(), st.integers(min_value=0, max_value=2**31 - 1)),
    et=st.one_of(st.integers(0, MAX_ENQUEUE_MS), st.floats(0, MAX_ENQUEUE_MS)),
    f=st.sampled_from(sorted(FUNCTIONS)),
    a=st.lists(JSON_SCALARS, max_size=3),
    k=st.dictionaries(st.text(max_size=8), JSON_SCALARS, max_size=3),
)
def test_every_payload_of_arqs_shape_is_handed_on(t: Any, et: Any, f: str, a: list[Any], k: Any) -> None:
    payload = read_payload(orjson.dumps({"t": t, "f": f, "a": a, "k": k, "et": et}), FUNCTIONS)
    assert (payload.function, payload.args, payload.kwargs) == (f, a, k)


def test_a_refusal_keeps_the_report_id_when_it_can_be_read() -> None:
    payload = {**good_payload("r-keep"), "et": "yesterday"}
    with pytest.raises(MalformedJob) as refused:
        read_payload(orjson.dumps(payload), FUNCTIONS)
    assert refused.value.report_id == "r-keep"
    assert refused.value.function == "echo"


@dataclass
class Queue:
    worker: ResearchWorker
    redis: aioredis.Redis
    client: ResearchClient
    settings: Settings
    token: str
    counter: int = 0

    async def put_raw(self, raw: bytes, *, wake: bool) -> str:
        """Write a payload where arq keeps jobs, as a plain client or an attacker with queue access could."""
        self.counter += 1
        job_id = f"{self.token}-raw-{self.counter}"
        await self.redis.psetex(job_key_prefix + job_id, 60_000, raw)
        await self.redis.zadd(self.settings.queue_name, {job_id: int(time.time() * 1000)})
        if wake:
            await self.redis.rpush(keys.wake(self.settings.queue_name), job_id)
        return job_id

    async def finished(self, job_id: str) -> None:
        deadline = time.monotonic() + 60  # generous: a loaded machine, not a slow worker
        while await self.redis.zscore(self.settings.queue_name, job_id) is not None:
            assert time.monotonic() < deadline, "the job never left the queue"
            await asyncio.sleep(0.01)

    async def quiet(self) -> None:
        """Wait until nothing of an earlier example is left to happen: no job queued, no wake-up
        token left, no task in flight. Hypothesis runs every example against this one worker, so a
        counter read before that would count what an earlier example left behind."""
        deadline = time.monotonic() + 60
        while (
            await self.redis.zcard(self.settings.queue_name)
            or await self.redis.llen(keys.wake(self.settings.queue_name))  # type: ignore[misc]
            or any(not task.done() for task in self.worker.tasks.values())
        ):
            assert time.monotonic() < deadline, "the worker never went quiet"
            await asyncio.sleep(0.01)

    def refusals(self) -> float:
        metrics = self.worker.runtime.metrics if self.worker.runtime else None
        assert metrics is not None
        value = metrics.registry.get_sample_value(
            "research_jobs_total", {"tool": "unknown", "outcome": "invalid_request"}
        )
        return value or 0.0


@pytest.fixture
async def queue(settings: Settings, redis: aioredis.Redis, token: str) -> AsyncIterator[Queue]:
    async with (
        running_worker(settings, TEST_TOOLS, poll_delay_s=0.1) as worker,
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=60) as client,
    ):
        yield Queue(worker, redis, client, settings, token)
        assert worker.main_task is not None and not worker.main_task.done(), "the worker stopped"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=malformed_payloads(), wake=st.booleans())
async def test_a_malformed_job_gets_invalid_request_leaves_the_queue_and_the_worker_runs_on(
    queue: Queue, raw: bytes, wake: bool
) -> None:
    await queue.quiet()
    before = queue.refusals()
    job_id = await queue.put_raw(raw, wake=wake)
    result = await queue.client.wait(job_id, wait_s=60)
    assert result["ok"] is False, result
    assert result["error"]["kind"] == "invalid_request"
    assert result["tool"] == "unknown"
    assert result["job_id"] == job_id
    await queue.finished(job_id)  # the result is written first, then the job leaves the queue
    for prefix in (job_key_prefix, in_progress_key_prefix, retry_key_prefix):
        assert not await queue.redis.exists(prefix + job_id)
    await queue.quiet()  # a second refusal of this job, if there were one, is counted by now
    assert queue.refusals() == before + 1
    # The worker is still taking jobs.
    ok = await queue.client.call("echo", {"report_id": f"r-{queue.token}-{queue.counter}", "value": "x"})
    assert ok["ok"] is True


async def test_a_malformed_job_is_logged_once_and_its_result_keeps_the_report_id(
    queue: Queue, caplog: pytest.LogCaptureFixture, report: str
) -> None:
    payload = {**good_payload(report), "f": ["echo"]}
    with caplog.at_level(logging.WARNING, logger="research.worker"):
        job_id = await queue.put_raw(orjson.dumps(payload), wake=True)
        result = await queue.client.wait(job_id)
        await asyncio.sleep(0.5)  # a few fallback polls: the job must not be seen again
    assert result["report_id"] == report
    assert "function name must be a string, not list" in result["error"]["message"]
    logged = [r for r in caplog.records if getattr(r, "fields", {}).get("job_id") == job_id]
    assert len(logged) == 1


async def test_keyword_arguments_named_ctx_reach_the_envelope_and_get_invalid_request(
    queue: Queue, report: str
) -> None:
    result = await queue.client.call("echo", {"report_id": report, "value": "v", "ctx": 1})
    assert result["error"]["kind"] == "invalid_request"
    assert "'ctx'" in result["error"]["message"]


async def test_a_queued_id_that_is_not_utf8_is_removed_and_counted(queue: Queue) -> None:
    raw_id = queue.token.encode() + b"-\xff\xfe"
    await queue.redis.psetex(job_key_prefix.encode() + raw_id, 60_000, orjson.dumps(good_payload()))
    await queue.redis.zadd(queue.settings.queue_name, {raw_id: 1})
    before = queue.refusals()
    deadline = time.monotonic() + 5
    while await queue.redis.zscore(queue.settings.queue_name, raw_id) is not None:
        assert time.monotonic() < deadline, "the worker never removed the job"
        await asyncio.sleep(0.05)
    assert not await queue.redis.exists(job_key_prefix.encode() + raw_id)
    assert queue.refusals() == before + 1


async def test_a_payload_gone_before_a_worker_took_it_ends_with_a_result(queue: Queue) -> None:
    queue.counter += 1
    job_id = f"{queue.token}-expired"
    await queue.redis.zadd(queue.settings.queue_name, {job_id: 1})
    result = await queue.client.wait(job_id)
    assert result["error"]["kind"] == "internal_error"
    assert "expired" in result["error"]["message"]
    await queue.finished(job_id)
    stored = loads(await queue.redis.get(keys.result(job_id)))
    assert stored == result
