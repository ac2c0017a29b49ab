"""Fixtures: a real Redis (test database, keys namespaced by a per-test token), real local servers."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator

import hypothesis
import pytest
import redis as syncredis
import redis.asyncio as aioredis

from tests.support import loopback
from tests.support.redis_server import test_redis_url
from tests.support.tls import TestCA, make_ca
from worker.config import Settings

loopback.install()

# Hypothesis's per-example deadline (200 ms by default) is a wall-clock bound that only an idle
# machine keeps: on a loaded one an example that waits on Redis or a server passes its deadline
# and the test fails as Flaky. Speed is the benchmarks' business (bench/), so no example has one.
hypothesis.settings.register_profile("research", deadline=None)
hypothesis.settings.load_profile("research")

# Workers the tests start (in this process or as child processes, from the environment) keep their
# evidence archive in a throwaway data directory, never the user's own.
_DATA_HOME = tempfile.mkdtemp(prefix="research-test-data-")
os.environ["XDG_DATA_HOME"] = _DATA_HOME
atexit.register(shutil.rmtree, _DATA_HOME, ignore_errors=True)


@pytest.fixture(autouse=True)
def _nothing_left_loopback() -> Iterator[None]:
    """Fails the test if anything tried to connect or resolve off loopback, even if it was caught."""
    before = len(loopback.violations)
    yield
    tried = loopback.violations[before:]
    assert not tried, f"the test tried to reach non-loopback destinations: {tried}"


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    url, embedded = test_redis_url()
    try:
        yield url
    finally:
        if embedded is not None:
            embedded.stop()


@pytest.fixture
def token() -> str:
    """Every key a test creates carries this token, so cleanup removes only the test's own keys."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def own_keys(redis_url: str, token: str) -> Iterator[None]:
    """Deletes, after the test, every key that carries the test's token and nothing else."""
    yield
    client = syncredis.Redis.from_url(redis_url)
    try:
        for key in client.scan_iter(match=f"*{token}*", count=1000):
            client.delete(key)
    finally:
        client.close()


@pytest.fixture
def settings(redis_url: str, token: str, own_keys: None) -> Settings:
    return Settings(
        redis_url=redis_url,
        queue_name=f"research-test:{token}:queue",
        worker_id=f"w-{token}",
        max_jobs=8,
    )


@pytest.fixture
async def redis(redis_url: str, own_keys: None) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def report(token: str) -> str:
    return f"r-{token}"


@pytest.fixture(scope="session")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    """A trustme CA for local TLS servers; workers trust it through RESEARCH_CA_BUNDLE."""
    return make_ca(tmp_path_factory.mktemp("ca"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--chaos-short",
        action="store_true",
        help="run the chaos suite in its short form (as CI does)",
    )


@pytest.fixture
def chaos_short(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--chaos-short"))
