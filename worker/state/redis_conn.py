"""Redis connections from the settings: one place that knows URLs, Sentinel and reconnection.

With ``redis+sentinel://`` the connections follow the primary through a failover: each new
connection asks the sentinels where the primary is, a connection to a primary that was demoted
fails its next write with READONLY (redis-py turns that into a connection error), and every
command is retried with backoff long enough for the sentinels to promote a replica. arq's own
Sentinel pool passes no retry settings to its connections, so the pool is built here instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from arq.connections import ArqRedis, RedisSettings, create_pool
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worker.serialization import dumps, loads

if TYPE_CHECKING:
    from worker.config import ClientSettings, RedisTarget, Settings

# Sentinels notice a dead primary after their down-after-milliseconds (commonly 5-30 s), then
# elect and promote: a command keeps retrying about that long before it fails. Each connection
# attempt asks the sentinels again, so the retry lands on the new primary as soon as there is one.
FAILOVER_RETRY = dict(cap=1.0, base=0.05)
FAILOVER_RETRIES = 12
SENTINEL_TIMEOUT_S = 1.0


def redis_settings(target: RedisTarget, *, fail_fast: bool = False) -> RedisSettings:
    if target.sentinels:
        settings = RedisSettings(
            host=list(target.sentinels),
            sentinel=True,
            sentinel_master=target.sentinel_master,
            database=target.database,
        )
    else:
        settings = RedisSettings.from_dsn(target.url)
    # A dropped connection (Redis restarted, a failover) is retried with backoff instead of failing
    # the command, so a worker rides out a restart without being restarted itself.
    settings.retry = Retry(ExponentialBackoff(cap=2.0, base=0.05), retries=5)
    settings.retry_on_error = [RedisConnectionError, RedisTimeoutError]
    settings.conn_timeout = 2
    settings.conn_retries = 10
    if fail_fast:
        # A command asking "is Redis there?": one quiet attempt, no retries and no warnings; the
        # caller decides how long to keep asking and what to tell the person waiting.
        settings.retry = None
        settings.retry_on_error = None
        settings.conn_timeout = 1
        settings.conn_retries = 0
    return settings


async def connect(settings: Settings | ClientSettings, *, fail_fast: bool = False) -> ArqRedis:
    target = settings.redis_target
    if target.sentinels and not fail_fast:
        pool = sentinel_pool(target)
        pool.job_serializer = dumps
        pool.job_deserializer = loads
        pool.default_queue_name = settings.queue_name
        await pool.ping()
        return pool
    return await create_pool(
        redis_settings(settings.redis_target, fail_fast=fail_fast),
        job_serializer=dumps,
        job_deserializer=loads,
        default_queue_name=settings.queue_name,
    )


def sentinel_pool(target: RedisTarget) -> ArqRedis:
    """A client of the primary the sentinels name, retrying through a failover."""
    parts = urlsplit(target.url)
    credentials: dict[str, Any] = {}
    if parts.username:
        credentials["username"] = unquote(parts.username)
    if parts.password:
        credentials["password"] = unquote(parts.password)
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        list(target.sentinels),
        sentinel_kwargs={"socket_timeout": SENTINEL_TIMEOUT_S, "socket_connect_timeout": SENTINEL_TIMEOUT_S},
        db=target.database,
        socket_connect_timeout=2,
        socket_keepalive=True,
        retry=Retry(ExponentialBackoff(**FAILOVER_RETRY), retries=FAILOVER_RETRIES),
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
        **credentials,
    )
    client: ArqRedis = sentinel.master_for(target.sentinel_master, redis_class=ArqRedis)
    return client
