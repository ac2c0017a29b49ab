"""ResearchClient: wakes on completion instead of polling, gives up cleanly at its deadline, reads
only what a client needs, says clearly how it was misused, and has a blocking twin."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import orjson
import pytest
import redis.asyncio as aioredis

from tests.support.processes import ROOT, start_worker, stop, wait_healthy
from tests.support.tools import TEST_TOOLS
from tests.support.workers import running_worker
from worker.client import (
    ClientError,
    ClientNotOpen,
    DuplicateJobId,
    ResearchClient,
    SyncResearchClient,
    UnsafeArguments,
)
from worker.config import ClientSettings, ConfigError, Settings
from worker.state.results import ResultStore


async def test_the_client_wakes_on_completion_without_polling_the_result(
    settings: Settings, token: str, report: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = 0
    original = ResultStore.read

    async def counting_read(self: ResultStore, job_id: str):  # type: ignore[no-untyped-def]
        nonlocal reads
        reads += 1
        return await original(self, job_id)

    async with (
        running_worker(settings, TEST_TOOLS),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=30) as client,
    ):
        job_id = await client.enqueue("slow", {"report_id": report, "seconds": 1.5})
        monkeypatch.setattr(ResultStore, "read", counting_read)
        result = await client.wait(job_id)
    assert result["ok"] is True and result["slept"] == 1.5
    # One read before blocking and one after the wake-up: a poller would have read dozens of times.
    assert reads <= 2


async def test_the_client_times_out_cleanly_when_no_worker_runs(
    settings: Settings, token: str, report: str
) -> None:
    async with ResearchClient(
        settings=settings, job_id_prefix=f"{token}-", wait_s=0.5, require_worker=False
    ) as client:
        result = await asyncio.wait_for(client.fetch(report, "https://example.org/", extract="full"), 10)
        assert result["ok"] is False
        assert result["error"]["kind"] == "timeout"
        assert result["tool"] == "fetch_page"
        assert result["report_id"] == report
        assert result["job_id"].startswith(f"{token}-")


async def test_a_deadline_shorter_than_the_job_returns_timeout_and_the_result_still_lands(
    settings: Settings, token: str, report: str, redis: aioredis.Redis
) -> None:
    async with (
        running_worker(settings, TEST_TOOLS),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client,
    ):
        job_id = await client.enqueue("slow", {"report_id": report, "seconds": 1.0})
        early = await client.wait(job_id, wait_s=0.2)
        assert early["error"]["kind"] == "timeout"
        late = await client.wait(job_id, wait_s=10)
    assert late["ok"] is True


async def test_a_job_id_cannot_be_enqueued_twice(settings: Settings, token: str, report: str) -> None:
    async with ResearchClient(settings=settings) as client:
        await client.enqueue("echo", {"report_id": report}, job_id=f"{token}-dup")
        with pytest.raises(DuplicateJobId, match="already exists"):
            await client.enqueue("echo", {"report_id": report}, job_id=f"{token}-dup")


async def test_every_client_waiting_on_a_job_wakes_with_its_result(
    settings: Settings, token: str, report: str
) -> None:
    async with (
        running_worker(settings, TEST_TOOLS),
        ResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=20) as first,
        ResearchClient(settings=settings, wait_s=20) as second,
    ):
        job_id = await first.enqueue("slow", {"report_id": report, "seconds": 0.5})
        results = await asyncio.gather(
            first.wait(job_id, fresh=True), second.wait(job_id, fresh=True), first.wait(job_id, fresh=True)
        )
    assert [r["ok"] for r in results] == [True, True, True]
    assert {r["job_id"] for r in results} == {job_id}


# What a client reads: where Redis is, the queue, its deadline; never the worker's settings.

BAD_WORKER_VARIABLES = {
    "RESEARCH_FETCH_BUDGET": "-1",
    "RESEARCH_SEARCH_MODEL": "a/frontier-model",
    "RESEARCH_GUARDIAN_ALLOW_CIDRS": "not a range",
    "RESEARCH_CA_BUNDLE": "/nonexistent/ca.pem",
    "RESEARCH_SEARCH_PROVIDER": "searxng",
}


def test_a_client_reads_only_what_a_client_needs() -> None:
    env = {
        **BAD_WORKER_VARIABLES,
        "REDIS_URL": "redis://redis.internal:6380/2",
        "RESEARCH_QUEUE": "reports:queue",
        "RESEARCH_CLIENT_WAIT_S": "7.5",
        "RESEARCH_BUDGET_WINDOW_S": "3600",
    }
    with pytest.raises(ConfigError):
        Settings.from_env(env)  # the worker would refuse to start with these
    assert ClientSettings.from_env(env) == ClientSettings(
        redis_url="redis://redis.internal:6380/2",
        queue_name="reports:queue",
        wait_s=7.5,
        budget_window_s=3600,
    )


async def test_an_orchestrator_with_a_bad_worker_variable_still_builds_and_uses_a_client(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in BAD_WORKER_VARIABLES.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("REDIS_URL", settings.redis_url or "")
    monkeypatch.setenv("RESEARCH_QUEUE", settings.queue_name)
    async with ResearchClient() as client:
        assert client.settings.queue_name == settings.queue_name
        assert await client.workers_alive() is False


@pytest.mark.parametrize(
    ("variable", "value"),
    [("RESEARCH_CLIENT_WAIT_S", "-3"), ("REDIS_URL", "http://redis:6379"), ("RESEARCH_QUEUE", "a queue")],
)
def test_a_clients_own_bad_variable_is_an_error_naming_it(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"^{variable}: "):
        ClientSettings.from_env({variable: value})


@pytest.mark.parametrize(
    "options",
    [
        {"wait_s": 0},
        {"wait_s": -1},
        {"wait_s": float("nan")},
        {"wait_s": True},
        {"wait_s": "5"},
        {"redis_url": ""},
        {"queue_name": 5},
        {"job_id_prefix": None},
    ],
    ids=lambda options: f"{next(iter(options))}={next(iter(options.values()))!r}",
)
def test_a_bad_constructor_argument_is_a_clear_error(options: dict[str, object]) -> None:
    with pytest.raises(ClientError, match=next(iter(options))):
        ResearchClient(settings=ClientSettings(), **options)  # type: ignore[arg-type]


CALLS_BEFORE_OPENING = {
    "search": lambda c: c.search("r-1", "q"),
    "fetch": lambda c: c.fetch("r-1", "https://example.org/"),
    "seed_urls": lambda c: c.seed_urls("r-1", ["https://example.org/"]),
    "call": lambda c: c.call("fetch_page", {"url": "https://example.org/"}, report_id="r-1"),
    "run": lambda c: c.run("fetch_page", {"report_id": "r-1"}),
    "enqueue": lambda c: c.enqueue("fetch_page", {"report_id": "r-1"}),
    "wait": lambda c: c.wait("some-job"),
    "result": lambda c: c.result("some-job"),
    "workers_alive": lambda c: c.workers_alive(),
}


@pytest.mark.parametrize("method", list(CALLS_BEFORE_OPENING))
async def test_using_a_client_before_opening_it_says_how_to_open_it(method: str) -> None:
    client = ResearchClient(settings=ClientSettings())
    with pytest.raises(ClientNotOpen, match="async with ResearchClient"):
        await CALLS_BEFORE_OPENING[method](client)


def test_the_misuse_check_is_not_an_assert_and_survives_python_O() -> None:
    script = (
        "import asyncio\n"
        "from worker.client import ClientNotOpen, ResearchClient\n"
        "from worker.config import ClientSettings\n"
        "try:\n"
        "    asyncio.run(ResearchClient(settings=ClientSettings()).fetch('r-1', 'https://example.org/'))\n"
        "except ClientNotOpen as exc:\n"
        "    print('refused:', exc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-O", "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.stdout.startswith("refused: open the client first"), proc.stderr


async def test_arguments_json_cannot_carry_are_refused_before_anything_is_enqueued(
    settings: Settings, report: str, redis: aioredis.Redis
) -> None:
    async with ResearchClient(settings=settings, require_worker=False) as client:
        for value in (2**70, -(2**70), object(), {1, 2j}):
            with pytest.raises(UnsafeArguments, match="not JSON a job can carry"):
                await client.run("echo", {"report_id": report, "value": value}, wait_s=1)
    assert await redis.zcard(settings.queue_name) == 0


@pytest.mark.parametrize("asked", [11, 10**6, -3, 2**63 - 1])
async def test_max_results_reaches_the_job_as_asked_for_the_job_to_clamp(
    settings: Settings, report: str, redis: aioredis.Redis, token: str, asked: int
) -> None:
    # The client does not clamp: the job's own clamp (jobs/search.py) is the one that counts, and
    # a broken one shows through the client too.
    async with ResearchClient(
        settings=settings, job_id_prefix=f"{token}-", wait_s=0.3, require_worker=False
    ) as client:
        result = await client.search(report, "tidal energy", max_results=asked)
        payload = orjson.loads(await redis.get(f"arq:job:{result['job_id']}"))
    assert payload["k"]["max_results"] == asked
    assert result["error"]["kind"] == "timeout"  # no worker ran in this test
    assert result["query"] == "tidal energy"


async def test_a_max_results_no_job_can_carry_is_refused_by_the_client(
    settings: Settings, report: str
) -> None:
    async with ResearchClient(settings=settings, wait_s=0.3, require_worker=False) as client:
        with pytest.raises(UnsafeArguments, match="not JSON a job can carry"):
            await client.search(report, "tidal energy", max_results=10**30)


# The synchronous twin, for scripts and notebooks.


def test_the_sync_client_serves_a_script(settings: Settings, report: str, token: str) -> None:
    worker = start_worker(settings, "sync")
    try:
        wait_healthy(settings, 1)
        with SyncResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=20) as client:
            assert client.workers_alive() is True
            result = client.run("echo", {"report_id": report, "value": "from a script"})
            again = client.result(result["job_id"])
    finally:
        stop(worker)
    assert result["ok"] is True and result["echo"] == "from a script"
    assert again == result


def test_the_sync_client_serves_a_notebook_whose_loop_is_running(
    settings: Settings, report: str, token: str
) -> None:
    async def notebook_cell() -> dict[str, object]:
        # A notebook runs cells inside its own event loop; a blocking client must still work there.
        with SyncResearchClient(settings=settings, job_id_prefix=f"{token}-", wait_s=20) as client:
            return client.run("echo", {"report_id": report, "value": "from a notebook"})

    worker = start_worker(settings, "notebook")
    try:
        wait_healthy(settings, 1)
        result = asyncio.run(notebook_cell())
    finally:
        stop(worker)
    assert result["ok"] is True and result["echo"] == "from a notebook"


def test_the_sync_client_before_opening_says_how_to_open_it() -> None:
    client = SyncResearchClient(settings=ClientSettings())
    with pytest.raises(ClientNotOpen, match="with SyncResearchClient"):
        client.fetch("r-1", "https://example.org/")
