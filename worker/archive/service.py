"""The archive as a worker runs it: the store its settings name, and one writer its tools share."""

from __future__ import annotations

import logging
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from worker.archive.masking import SecretMask
from worker.archive.store import Store
from worker.archive.writer import Archive
from worker.config import ArchiveBucket, ArchiveDirectory, ArchiveTarget
from worker.logs import fields

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from worker.config import Settings
    from worker.metrics import Metrics

log = logging.getLogger("research.archive")


def open_store(target: ArchiveTarget | None, endpoint: str | None) -> Store | None:
    if isinstance(target, ArchiveDirectory):
        from worker.archive.directory import DirectoryStore

        return DirectoryStore(Path(target.path))
    if isinstance(target, ArchiveBucket):
        from worker.archive.s3 import S3Store

        return S3Store(target.bucket, target.prefix, endpoint)
    return None


def open_archive(settings: Settings, redis: Redis, metrics: Metrics) -> Archive:
    """The worker's archive as configured (off: an archive whose receipts are all empty)."""
    return Archive(
        open_store(settings.archive, settings.archive_endpoint),
        redis,
        metrics,
        queue_name=settings.queue_name,
        worker_id=settings.worker_id,
        days=settings.archive_days,
        window_s=settings.budget_window_s,
        info=warcinfo_fields(settings),
        secrets=SecretMask.from_settings(settings),
    )


def warcinfo_fields(settings: Settings) -> dict[str, str]:
    """What every file's ``warcinfo`` says of the worker that wrote it (WARC 1.1, annex C)."""
    try:
        release = metadata.version("research-worker")
    except metadata.PackageNotFoundError:
        release = "unknown"
    return {
        "software": f"research-worker/{release}",
        "operator": settings.archive_operator,
        "http-header-user-agent": settings.user_agent,
        # RFC 9309 obeyed (RESEARCH_ROBOTS=on), or not consulted.
        "robots": "obey" if settings.robots else "ignore",
    }


class SharedArchive:
    """One archive for every tool of a worker: opened by the first tool that starts, closed by the
    last that stops (the tools start and stop with the worker; ``worker.settings`` shares it)."""

    def __init__(self) -> None:
        self.archive: Archive | None = None
        self._users = 0

    def open(self, settings: Settings, redis: Redis, metrics: Metrics) -> Archive:
        if self.archive is None:
            self.archive = open_archive(settings, redis, metrics)
            self.archive.start()
            if self.archive.store is not None:
                log.info(
                    "evidence archive on",
                    extra=fields(where=self.archive.store.where, days=settings.archive_days),
                )
        self._users += 1
        return self.archive

    async def close(self) -> None:
        self._users -= 1
        if self._users <= 0 and self.archive is not None:
            archive, self.archive = self.archive, None
            await archive.stop()
