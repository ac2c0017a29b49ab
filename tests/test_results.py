"""Results: valid UTF-8 by construction, first writer wins, and a result that cannot be written is
replaced by one that says so: no job ends without a result."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.exceptions import OutOfMemoryError

from tests.support.redis_process import RedisProcess
from tests.support.results import ok_result
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import Settings
from worker.errors import InvalidRequest
from worker.runtime.context import JobContext
from worker.runtime.envelope import FunctionTool, write_result
from worker.runtime.worker import build_runtime
from worker.serialization import loads
from worker.state import keys
from worker.state.result_records import MAX_MESSAGE_CHARS, as_json
from worker.state.results import ResultStore

# Text as a server's undecodable bytes leave it in Python: any code point, lone surrogates included.
ANY_CHAR = st.characters(codec=None, exclude_categories=())
HOSTILE_TEXT = st.text(alphabet=ANY_CHAR, max_size=60)

# What the test tools hand back, by key: values that cannot cross the queue as job arguments.
PRODUCED: dict[str, Any] = {}
RAISED: dict[str, str] = {}
_keys = itertools.count()


async def _produce(job: JobContext, args: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = PRODUCED.pop(args["key"])
    return value


async def _refuse(job: JobContext, args: dict[str, Any]) -> dict[str, Any]:
    raise InvalidRequest(RAISED.pop(args["key"]))


PRODUCE = FunctionTool("produce", ("key",), lambda s: 5.0, _produce)
REFUSE = FunctionTool("refuse", ("key",), lambda s: 5.0, _refuse)


def replaced(text: str) -> str:
    return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)


@pytest.fixture
async def client(settings: Settings, token: str) -> AsyncIterator[ResearchClient]:
    async with (
        running_worker(settings, [PRODUCE, REFUSE]),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=10) as c,
    ):
        yield c


async def produced(client: ResearchClient, report: str, fields: dict[str, Any]) -> dict[str, Any]:
    key = f"k{next(_keys)}"
    PRODUCED[key] = fields
    return await client.call("produce", {"report_id": report, "key": key})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    title=HOSTILE_TEXT,
    links=st.lists(HOSTILE_TEXT, max_size=4),
    nested=st.dictionaries(HOSTILE_TEXT, HOSTILE_TEXT, max_size=3),
)
async def test_strings_with_lone_surrogates_reach_the_result_as_replacement_characters(
    client: ResearchClient, report: str, title: str, links: list[str], nested: dict[str, str]
) -> None:
    result = await produced(client, report, {"title": title, "links": links, "nested": nested})
    assert result["ok"] is True
    assert result["title"] == replaced(title)
    assert result["links"] == [replaced(link) for link in links]
    assert result["nested"] == {replaced(k): replaced(v) for k, v in nested.items()}


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(message=st.one_of(HOSTILE_TEXT, st.text(alphabet=ANY_CHAR, min_size=5_000, max_size=20_000)))
async def test_an_error_message_is_valid_utf8_and_at_most_its_bound(
    client: ResearchClient, report: str, message: str
) -> None:
    key = f"k{next(_keys)}"
    RAISED[key] = message
    result = await client.call("refuse", {"report_id": report, "key": key})
    assert result["error"] == {"kind": "invalid_request", "message": replaced(message[:MAX_MESSAGE_CHARS])}


UNSERIALIZABLE = st.one_of(
    st.builds(object),
    st.integers(min_value=2**64),
    st.integers(max_value=-(2**63) - 1),
    st.builds(lambda: b"\xff raw bytes"),
    st.builds(lambda: {1j: "complex key"}),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=UNSERIALIZABLE, where=st.sampled_from(["top", "list", "nested"]))
async def test_a_result_that_cannot_be_serialized_is_replaced_by_one_that_says_so(
    client: ResearchClient, redis: aioredis.Redis, report: str, value: object, where: str
) -> None:
    fields = {"top": {"v": value}, "list": {"v": ["ok", value]}, "nested": {"v": {"w": [value]}}}[where]
    result = await produced(client, report, fields)
    assert result["ok"] is False
    assert result["error"]["kind"] == "internal_error"
    assert result["report_id"] == report and result["tool"] == "produce"
    assert loads(await redis.get(keys.result(result["job_id"]))) == result


async def test_the_first_result_written_stands_and_a_second_writes_nothing(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    store = ResultStore(redis, ttl_s=60, queue_name=settings.queue_name)
    job_id = f"{token}-twice"
    first = ok_result("echo", report, job_id, {"echo": "first"})
    second = ok_result("echo", report, job_id, {"echo": "second"})
    written = await asyncio.gather(*(store.write(r, 1.0) for r in (first, second, first, second)))
    outcomes = [w.standing for w in written]
    assert outcomes.count(None) == 1
    winner = next(r for r, o in zip((first, second, first, second), outcomes, strict=True) if o is None)
    assert all(o == winner for o in outcomes if o is not None)
    assert await store.read(job_id) == winner
    assert await redis.llen(keys.done(job_id)) == 1
    lines = [loads(raw) for raw in await redis.lrange(keys.recent(settings.queue_name), 0, -1)]
    assert [line["job_id"] for line in lines].count(job_id) == 1


async def test_a_late_writer_gets_the_standing_result_back(
    settings: Settings, redis: aioredis.Redis, token: str, report: str
) -> None:
    runtime = await build_runtime(settings, redis)
    job_id = f"{token}-late"
    await runtime.results.write(ok_result("echo", report, job_id, {"echo": "agent read this"}), 1.0)
    standing, first = await write_result(runtime, ok_result("echo", report, job_id, {"echo": "late"}), 1.0)
    assert first is False
    assert as_json(standing)["echo"] == "agent read this"


@pytest.fixture
def small_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(
        tmp_path, persistent=False, extra_args=["--maxmemory", "4mb", "--maxmemory-policy", "noeviction"]
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def fill_until_refused(redis: aioredis.Redis) -> None:
    filler = b"x" * 65536
    for i in range(1000):
        try:
            await redis.set(f"filler:{i}", filler)
        except OutOfMemoryError:
            return
    raise AssertionError("Redis never ran out of memory")


async def test_a_result_redis_refuses_becomes_a_stand_in_once_redis_takes_writes_again(
    settings: Settings, small_redis: RedisProcess, report: str
) -> None:
    s = dataclasses.replace(settings, redis_url=small_redis.url)
    redis = aioredis.Redis.from_url(small_redis.url)
    try:
        runtime = await build_runtime(s, redis)
        await fill_until_refused(redis)
        await redis.config_set("maxmemory", "1mb")  # and keep it refusing, whatever a write's size
        result = ok_result("echo", report, "job-oom", {"echo": "y" * 1000})
        writing = asyncio.create_task(write_result(runtime, result, 1.0))
        await asyncio.sleep(0.5)
        assert not writing.done()  # refused, and retrying
        await redis.config_set("maxmemory", "0")
        standing, first = await writing
        assert first is True
        assert as_json(standing)["error"]["kind"] == "internal_error"
        assert loads(await redis.get(keys.result("job-oom"))) == as_json(standing)
    finally:
        await redis.aclose()
