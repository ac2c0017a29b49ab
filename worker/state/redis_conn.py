"""Redis connections from the settings: one place that knows Redis URLs, Sentinel and reconnection.

The URL parser lives here, beside the connections it describes; configuration asks it at start-up,
so a bad ``REDIS_URL`` stops the process before anything connects. That is why this module stands
in the foundation layer with ``worker.config`` (tests/test_layout.py), below the rest of
``worker.state``: it imports nothing of the project but serialization and redaction, and takes the
settings as the two fields it reads (``Configured``), never ``worker.config`` itself.

With ``redis+sentinel://`` the connections follow the primary through a failover: each new
connection asks the sentinels where the primary is, a connection to a primary that was demoted
fails its next write with READONLY (redis-py turns that into a connection error), and every
command is retried with backoff long enough for the sentinels to promote a replica. arq's own
Sentinel pool passes no retry settings to its connections, so the pool is built here instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol
from urllib.parse import unquote, urlsplit

from arq.connections import ArqRedis, RedisSettings, create_pool
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worker.redact import redact_url
from worker.serialization import dumps, loads

# Sentinels notice a dead primary after their down-after-milliseconds (commonly 5-30 s), then
# elect and promote: a command keeps retrying about that long before it fails. Each connection
# attempt asks the sentinels again, so the retry lands on the new primary as soon as there is one.
FAILOVER_RETRY = dict(cap=1.0, base=0.05)
FAILOVER_RETRIES = 12
SENTINEL_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class RedisTarget:
    """Where Redis is: a plain URL, or Sentinel hosts and a master name for failover."""

    url: str
    sentinels: tuple[tuple[str, int], ...] = ()
    sentinel_master: str = ""
    database: int = 0


class Configured(Protocol):
    """What a connection reads of the settings (``worker.config``'s Settings or ClientSettings)."""

    @property
    def redis_target(self) -> RedisTarget: ...

    @property
    def queue_name(self) -> str: ...


def parse_redis_url(raw: str) -> RedisTarget:
    """Accept redis://, rediss://, unix:// and redis+sentinel://host:port,host:port/master[/db].

    A URL that is none of them is a ValueError whose message never shows its password.
    """
    parts = urlsplit(raw)
    shown = redact_url(raw)
    if parts.scheme == "redis+sentinel":
        hosts = []
        for item in parts.netloc.rpartition("@")[2].split(","):
            host, _, port = item.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"sentinel address {item!r} is not host:port")
            hosts.append((host.strip("[]"), int(port)))
        path = [p for p in parts.path.split("/") if p]
        if not path:
            raise ValueError("redis+sentinel URL needs a master name as its path")
        database = _database(path[1] if len(path) > 1 else "0")
        return RedisTarget(url=raw, sentinels=tuple(hosts), sentinel_master=path[0], database=database)
    if parts.scheme in {"redis", "rediss"}:
        try:
            _ = parts.port
        except ValueError:
            raise ValueError(f"{shown!r} has an invalid port") from None
        if not parts.hostname:
            raise ValueError(f"{shown!r} has no host")
        return RedisTarget(url=raw, database=_database(parts.path.strip("/") or "0"))
    if parts.scheme == "unix":
        if not parts.path:
            raise ValueError(f"{shown!r} has no socket path")
        return RedisTarget(url=raw)
    raise ValueError(f"{shown!r} is not a redis://, rediss://, unix:// or redis+sentinel:// URL")


def _database(raw: str) -> int:
    if not raw.isdigit():
        raise ValueError(f"database {raw!r} is not a number")
    return int(raw)


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


async def connect(settings: Configured, *, fail_fast: bool = False) -> ArqRedis:
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
    credentials: dict[str, str] = {}
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
