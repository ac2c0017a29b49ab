"""Scans whose OCR stopped short, kept so that a later piece or find reads on where it stopped.

A fetch reads as many pages of a scan as its deadline and the report's OCR budget allow, and its
kept document (``documents.py``) holds the text of those pages. The scan's bytes and the pages
read so far are kept here beside it, under the kept document's digest, for the same window: a
continuation that reaches past the last page read loads them and OCRs the next pages, with no
second fetch. One string, ``research:ocr-scan:{digest}``: a ten-digit length, the pages' texts as
orjson, then the body. A scan read to its end keeps nothing here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson
from redis.exceptions import RedisError

from worker.state.keys import PREFIX

if TYPE_CHECKING:
    from redis.asyncio import Redis

HEADER = 10
MAX_PAGES_JSON = 64 * 1024 * 1024


def scan_key(digest: str) -> str:
    return f"{PREFIX}ocr-scan:{digest}"


class Scans:
    def __init__(self, redis: Redis, *, ttl_s: int) -> None:
        self._redis = redis
        self._ttl_s = ttl_s

    async def keep(self, digest: str, body: bytes, pages: list[str]) -> bool:
        """Keep the scan for its window; False when Redis would not (a continuation then reads
        only what the first fetch read, and says OCR stopped)."""
        record = orjson.dumps(pages)
        try:
            await self._redis.set(
                scan_key(digest), f"{len(record):0{HEADER}d}".encode() + record + body, ex=self._ttl_s
            )
        except (RedisError, OSError):
            return False
        return True

    async def load(self, digest: str) -> tuple[bytes, list[str]] | None:
        """The scan's bytes and the pages read so far; None when it is not kept (or is malformed)."""
        try:
            raw = await self._redis.get(scan_key(digest))
        except (RedisError, OSError):
            return None
        if not isinstance(raw, bytes) or len(raw) < HEADER or not raw[:HEADER].isdigit():
            return None
        length = int(raw[:HEADER])
        if length > MAX_PAGES_JSON or len(raw) < HEADER + length:
            return None
        try:
            pages = orjson.loads(raw[HEADER : HEADER + length])
        except orjson.JSONDecodeError:
            return None
        if not isinstance(pages, list) or not all(isinstance(page, str) for page in pages):
            return None
        return raw[HEADER + length :], pages
