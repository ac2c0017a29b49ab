"""Kept documents: the whole text of what a report fetched, for the pieces it reads next.

A fetch returns one piece of a document; the rest is read by continuations (an offset, a find),
which must not fetch again nor depend on the 15-minute page cache. So each fetched document's
whole text is kept here at its first fetch, in every format, for the report's budget window.

A document is a hash: ``meta`` (the page record without its text, and per format its length and
page offsets) and one field per chunk of ``CHUNK_CHARS`` characters, zlib-compressed, so a piece
reads one or two chunks, never the whole. Each report maps (extract, URL) to the document it read,
so a continuation reads exactly what that report's first fetch returned, even if the page changed.

Keeping is best effort: a document that cannot be written (Redis full, Redis away) costs the fetch
nothing, and a continuation that finds it gone fetches again and says ``refetched``. That makes
kept documents, like the page cache, what Redis may shed first under memory pressure.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import orjson
from redis.exceptions import RedisError

from worker.logs import fields
from worker.state import keys, page_entry
from worker.state.page_entry import Page

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger("research.documents")

CHUNK_CHARS = 65_536
VERSION = 1


@dataclass(frozen=True)
class Layout:
    """One format's whole text, as its pieces need it: its length and where each PDF page starts."""

    total_chars: int
    page_offsets: tuple[int, ...] | None


@dataclass(frozen=True)
class Kept:
    digest: str
    page: Page  # the page's record, its text left out
    layouts: Mapping[str, Layout]


class Gone:
    """The report read this document, but it is no longer kept (expired, or shed by Redis)."""


GONE = Gone()


def digest_of(page: Page, texts: Mapping[str, str]) -> str:
    """One document per fetch: its URL, what the fetch said of it, and its whole text."""
    h = hashlib.sha256()
    for part in (page.url, page.final_url, page.fetched_at, page.extraction, str(page.status)):
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    for name in sorted(texts):
        h.update(name.encode() + b"\0" + texts[name].encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def _chunks(text: str) -> list[bytes]:
    return [
        zlib.compress(text[start : start + CHUNK_CHARS].encode("utf-8", "surrogatepass"), 1)
        for start in range(0, max(1, len(text)), CHUNK_CHARS)
    ]


def _chunk_text(raw: bytes) -> str:
    return zlib.decompress(raw).decode("utf-8", "surrogatepass")


class KeptDocuments:
    def __init__(self, redis: Redis, *, ttl_s: int) -> None:
        self._redis = redis
        self._ttl_s = ttl_s

    async def keep(
        self, page: Page, texts: Mapping[str, str], page_offsets: Mapping[str, Sequence[int] | None]
    ) -> str | None:
        """Keep a fetched document; its digest, or None when it could not be kept."""
        digest = digest_of(page, texts)
        # Compressing a few MB takes tens of ms: off the event loop (zlib releases the GIL).
        chunks = await asyncio.to_thread(lambda: {name: _chunks(text) for name, text in texts.items()})
        meta = {
            "v": VERSION,
            "page": orjson.loads(page_entry.encode(replace(page, text=""))),
            "layouts": {
                name: {"total": len(text), "pages": list(page_offsets.get(name) or []) or None}
                for name, text in texts.items()
            },
        }
        mapping: dict[str, bytes] = {"meta": orjson.dumps(meta)}
        for name, parts in chunks.items():
            mapping.update({f"{name}:{index}": part for index, part in enumerate(parts)})
        key = keys.document(digest)
        try:
            async with self._redis.pipeline(transaction=True) as tx:
                tx.hset(key, mapping=mapping)
                tx.expire(key, self._ttl_s)
                await tx.execute()
        except RedisError as exc:
            log.warning(
                "a fetched document could not be kept for continuations",
                extra=fields(url=page.url, chars=sum(map(len, texts.values())), error=type(exc).__name__),
            )
            return None
        return digest

    async def remember(self, report_id: str, extract: str, url: str, digest: str) -> None:
        """Note that this report read ``digest`` for (extract, url); keep both for its window."""
        try:
            async with self._redis.pipeline(transaction=True) as tx:
                tx.hset(keys.documents(report_id), _field(extract, url), digest)
                tx.expire(keys.documents(report_id), self._ttl_s)
                tx.expire(keys.document(digest), self._ttl_s)
                await tx.execute()
        except RedisError as exc:
            log.warning("a report's kept document could not be noted", extra=fields(error=type(exc).__name__))

    async def lookup(self, report_id: str, extract: str, url: str) -> Kept | Gone | None:
        """The document this report read for (extract, url); GONE when no longer kept; None when the
        report never fetched it."""
        digest = await self._redis.hget(keys.documents(report_id), _field(extract, url))  # type: ignore[misc]
        if digest is None:
            return None
        kept = await self.lookup_digest(digest.decode() if isinstance(digest, bytes) else str(digest))
        return kept if kept is not None else GONE

    async def lookup_digest(self, digest: str) -> Kept | None:
        raw = await self._redis.hget(keys.document(digest), "meta")  # type: ignore[misc]
        return _kept(digest, raw) if raw is not None else None

    async def text(self, kept: Kept, name: str, start: int, end: int) -> str | None:
        """Characters ``[start, end)`` of the document's text in format ``name``; None when gone."""
        if end <= start:
            return ""
        first, last = start // CHUNK_CHARS, (end - 1) // CHUNK_CHARS
        fields_ = [f"{name}:{index}" for index in range(first, last + 1)]
        raw = await self._redis.hmget(keys.document(kept.digest), fields_)  # type: ignore[misc]
        if any(part is None for part in raw):
            return None
        joined = "".join(_chunk_text(part) for part in raw)
        return joined[start - first * CHUNK_CHARS : end - first * CHUNK_CHARS]

    async def whole(self, kept: Kept, name: str) -> str | None:
        layout = kept.layouts[name]
        return await self.text(kept, name, 0, layout.total_chars) if layout.total_chars else ""


def _field(extract: str, url: str) -> str:
    return f"{extract}\n{url}"


def _kept(digest: str, raw: bytes) -> Kept | None:
    """Redis is shared state: a meta of any other shape is no document at all."""
    try:
        meta = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(meta, dict) or meta.get("v") != VERSION or not isinstance(meta.get("layouts"), dict):
        return None
    page = page_entry.decode(orjson.dumps(meta.get("page")))
    if not isinstance(page, Page):
        return None
    layouts: dict[str, Layout] = {}
    for name, value in meta["layouts"].items():
        total, pages = (value.get("total"), value.get("pages")) if isinstance(value, dict) else (None, None)
        if not isinstance(total, int) or isinstance(total, bool) or total < 0:
            return None
        if pages is not None and not (isinstance(pages, list) and all(type(p) is int for p in pages)):
            return None
        layouts[str(name)] = Layout(total, tuple(pages) if pages is not None else None)
    return Kept(digest, page, layouts)
