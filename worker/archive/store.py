"""The archive's storage: one small interface, a directory or S3-compatible object storage behind it.

Keys are the archive's own (``worker.archive.ids``): day folders of record files. A record file is
written once and never changed (``create``); retention removes whole day folders. A store raises
``StoreFailed`` for every failure (refused, full, gone, unreachable), with a short reason that is
safe to log, so the writer has one thing to catch.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol


class StoreFailed(Exception):
    """The store could not do what was asked; ``reason`` names why in a few words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Store(Protocol):
    @property
    def where(self) -> str:
        """Where the archive is, for logs and the dashboard (no credentials)."""

    @property
    def identity(self) -> str:
        """What names this store among every worker's (a directory is per machine, a bucket shared):
        deduplication refers only to records in the same store."""

    async def create(self, key: str, data: bytes) -> None:
        """Write a new file; the key must not exist yet (records are immutable)."""

    def stream(self, key: str) -> AsyncIterator[bytes]:
        """A file's bytes, a chunk at a time, as stored (never decoded); StoreFailed when missing."""

    async def days(self) -> list[str]:
        """The day folders under ``records/`` (``YYYY-MM-DD``), oldest first."""

    async def delete_day(self, day: str) -> int:
        """Delete one day folder whole; returns how many files went."""

    async def close(self) -> None: ...
