"""Redis connections from the settings: one place that knows URLs, Sentinel and reconnection."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arq.connections import ArqRedis, RedisSettings, create_pool
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worker.serialization import dumps, loads

if TYPE_CHECKING:
    from worker.config import RedisTarget, Settings


def redis_settings(target: RedisTarget) -> RedisSettings:
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
    return settings


async def connect(settings: Settings) -> ArqRedis:
    return await create_pool(
        redis_settings(settings.redis_target),
        job_serializer=dumps,
        job_deserializer=loads,
        default_queue_name=settings.queue_name,
    )
