"""``run`` and ``health``: a worker, and the probe that says whether this replica's worker beats."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import socket
import sys

from redis.exceptions import RedisError

from worker import embedded
from worker.cli.common import HEALTH_REACH_S, REACH_S, locate, reach
from worker.cli.exits import Exit
from worker.config import Settings, default_worker_id, redact_url
from worker.embedded import Located
from worker.logs import fields
from worker.runtime import fingerprint
from worker.state import health, keys

log = logging.getLogger("research.cli")


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    with embedded.redis_for_worker(
        settings.redis_url, settings.runtime_dir, forced=settings.embedded
    ) as found:
        settings = dataclasses.replace(settings, redis_url=found.url)
        asyncio.run(_joining(found, settings))  # unreachable: its own one line, exit 4
        # Which Redis, and why, before anything else: every command on the machine may pick a
        # different one (REDIS_URL, an embedded one, whatever answers at the default address).
        shown = redact_url(found.url)
        log.info(
            f"using Redis at {shown} ({found.why()})",
            extra=fields(redis_url=shown, found=found.source.value, queue=settings.queue_name),
        )
        from worker import settings as composition  # the tools take a while to import: not before Redis

        composition.build_worker(settings, burst=args.burst, render=args.render).run()
    return Exit.OK


async def _joining(found: Located, settings: Settings) -> None:
    """Reach Redis, and warn when the queue's workers run with settings that change results."""
    redis = await reach(found, settings, REACH_S)
    try:
        differ = await fingerprint.others_differ(redis, settings)
    except (RedisError, OSError) as exc:
        log.debug(
            "could not compare settings with the queue's workers", extra=fields(error=type(exc).__name__)
        )
        differ = {}
    finally:
        await redis.aclose()
    for worker_id, names in sorted(differ.items()):
        # Names only: the values may be operators' (ranges, paths) and the point is which to align.
        log.warning(
            f"worker {worker_id} on queue {settings.queue_name} runs with other settings that change "
            f"results: {', '.join(names)}; jobs go to either worker at random, so align them or use "
            "another RESEARCH_QUEUE",
            extra=fields(other_worker=worker_id, differing=names, queue=settings.queue_name),
        )


def cmd_health(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_health(settings))


async def _health(settings: Settings) -> int:
    """Exit 0 when this replica's health key is fresh (Docker HEALTHCHECK, k8s liveness)."""
    settings, found = locate(settings)
    redis = await reach(found, settings, HEALTH_REACH_S)
    try:
        if settings.worker_id != default_worker_id():
            who = f"worker {settings.worker_id}"
            alive = bool(await redis.exists(keys.health(settings.queue_name, settings.worker_id)))
        else:
            # The probe runs in its own process, so it cannot know the worker's pid: any replica
            # of this host (a container's hostname is its own) counts.
            who = f"a worker of host {socket.gethostname()}"
            mine = f"{socket.gethostname()}-"
            replicas = await health.replicas(redis, settings.queue_name)
            alive = any(replica.worker_id.startswith(mine) for replica in replicas)
    finally:
        await redis.aclose()
    # One line either way, on stdout: a person sees the verdict, a probe reads the exit code.
    verdict = "healthy: {} beats on queue {}" if alive else "unhealthy: {} is not beating on queue {}"
    sys.stdout.write(verdict.format(who, settings.queue_name) + "\n")
    return Exit.OK if alive else Exit.NO_WORKER
