"""Kept documents: the whole text of what a report fetched, for the pieces it reads next.

A fetch returns one piece of a document; the rest is read by continuations (an offset, a find),
which must not fetch again nor depend on the 15-minute page cache. So each fetched document's
whole text is kept here at its first fetch, in every format, for the report's budget window.

A document is one string: a small record (the page without its text, and per format its length,
page offsets and chunk byte ranges) behind a fixed-width header that gives its length, then its
text, every format's chunks of ``CHUNK_CHARS`` characters zlib-compressed one after another. A
lookup reads the head (GETRANGE), which nearly always holds the whole record; a piece reads one or
two chunks with GETRANGE, never the whole. One string, so one SET keeps it, and a document shed
or expired takes its record with it. Each report maps (extract, URL) to the document it read, so a
continuation reads exactly what that report's first fetch returned, even if the page changed.

The text counts in the page cache's memory discipline: it is indexed and sized as the cache's
pages are (``keys.document_index``, ``keys.document_bytes``), bounded (``MAX_DOCUMENT_BYTES``, the
documents closest to expiry dropped first to make room), shed after the cache's own pages when
Redis is near full or refuses a write (``worker.state.memory``), and never forced in when Redis is
full. A continuation that finds its text gone fetches again and says ``refetched``: kept documents
are what a full Redis may lose at no cost but a fetch, never a result, a budget or a health beat.
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
from worker.state import keys
from worker.state.clock import RedisClock
from worker.state.leases import Renewals
from worker.state.memory import BOOKKEEPING_RENEW_S, CacheRoom, relieving
from worker.state.pages import entry as page_entry
from worker.state.pages.entry import Page

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger("research.documents")

CHUNK_CHARS = 65_536
VERSION = 3
# The record's length, in ASCII digits, at the head of the document.
HEADER_BYTES = 10
# A lookup reads this much of the head: the whole record, unless the page brought hundreds of links.
HEAD_BYTES = 32 * 1024

# All documents' texts of a queue: this bound, and what Redis's memory allows (worker.state.memory).
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
MAX_EVICTIONS = 64

# The keep, as a Lua function that both KEEP_SCRIPT and the page cache's finish script
# (cache_finish.lua) run: a leading fetch keeps its document in the same step as it ends its page
# flight. K: 1 the document, 2 the documents' index, 3 their total bytes, 4 the report's note of the
# document it read. A: 1 the document, 2 time to live ms, 3 the bound in bytes, 4 the most
# evictions, 5 the document's digest, 6 how long the bookkeeping keys live (ms: longer than any
# document), 7 '1' to renew the bookkeeping's time to live (each worker does at most once a
# minute). ``now``: Redis's clock, ms (worker.state.clock). ``room``: what Redis has free beyond its
# headroom (bytes, negative past it; '' when its memory bounds nothing, worker.state.memory), which
# lowers the bound to what the documents hold plus that room, as the cache's store does: the
# documents hold the cached pages' text, so they give way to Redis's headroom in the step that
# keeps one, not only when a fetch next checks. Returns 1 when kept.
#
# The document is indexed and counted in the same step it is written (the bookkeeping never misses
# bytes it holds), and room is made by dropping the documents closest to expiry, each only while it
# is still the one its member counted (STRLEN). The report's note is small, beside it. As in the
# page cache's store, the size travels in the index member, so one ZADD indexes and sizes the
# document and one INCRBY counts it: the common keep is five commands. Its first write is the
# ZADD, so a full Redis refuses it before anything is written.
KEEP_FUNCTION = """
local function keep_document(K, A, now, room)
  local size = string.len(A[1])
  local bound = tonumber(A[3])
  local mine = K[1] .. '|' .. size
  local grown = 0
  if redis.call('ZADD', K[2], now + tonumber(A[2]), mine) == 1 then
    grown = size
  end
  local total = redis.call('INCRBY', K[3], grown)
  if room ~= '' then
    bound = math.max(0, math.min(bound, total - grown + tonumber(room)))
  end
  local freed, evicted = 0, 0
  while total - freed > bound and evicted < tonumber(A[4]) do
    local oldest = redis.call('ZRANGE', K[2], 0, 0)
    if #oldest == 0 or oldest[1] == mine then
      break
    end
    local key, bytes = string.match(oldest[1], '^(.*)|(%d+)$')
    key, bytes = key or oldest[1], tonumber(bytes or '0')
    redis.call('ZREM', K[2], oldest[1])
    if redis.call('STRLEN', key) == bytes then
      redis.call('UNLINK', key)
    end
    freed = freed + bytes
    evicted = evicted + 1
  end
  local kept = 0
  if total - freed <= bound then
    redis.call('SET', K[1], A[1], 'PX', A[2])
    redis.call('SET', K[4], A[5], 'PX', A[2])
    kept = 1
  else
    redis.call('ZREM', K[2], mine)
    freed = freed + size
  end
  if freed > 0 then
    redis.call('DECRBY', K[3], math.min(freed, total))
  end
  if A[7] == '1' or total == grown then
    redis.call('PEXPIRE', K[2], A[6])
    redis.call('PEXPIRE', K[3], A[6])
  end
  return kept
end
"""

# KEYS and ARGV: the keep's own, then ARGV 8: now (Redis's clock, ms), 9: the room beyond Redis's
# headroom. A document kept without a page flight (the cache off).
KEEP_SCRIPT = (
    KEEP_FUNCTION
    + """
return keep_document(KEYS, ARGV, tonumber(ARGV[8]), ARGV[9])
"""
)


@dataclass(frozen=True)
class Layout:
    """One format's whole text, as its pieces need it: its length, where each PDF page starts,
    and where each compressed chunk lies in the stored text."""

    total_chars: int
    page_offsets: tuple[int, ...] | None
    chunks: tuple[tuple[int, int], ...] = ()  # byte ranges [start, end) in the stored text


@dataclass(frozen=True)
class Kept:
    digest: str
    page: Page  # the page's record, its text left out
    layouts: Mapping[str, Layout]
    base: int = 0  # where the text starts in the stored document (its chunk ranges count from here)


class Gone:
    """The report read this document, but it is no longer kept (expired, or shed by Redis)."""


GONE = Gone()


def digest_of(document: bytes) -> str:
    """A document is named by its bytes: two fetches that name the same document stored the same
    bytes, so one's keep over the other's changes nothing a reader of either sees. (A name made of
    the page and its text alone let two fetches in one second, whose records or chunk layouts
    differ, share a name: a reader holding one's record read the other's chunks, and a Markdown
    answer came back with the text format's characters.)"""
    return hashlib.sha256(document).hexdigest()


def _chunks(text: str) -> list[bytes]:
    return [
        zlib.compress(text[start : start + CHUNK_CHARS].encode("utf-8", "surrogatepass"), 1)
        for start in range(0, max(1, len(text)), CHUNK_CHARS)
    ]


def _chunk_text(raw: bytes) -> str:
    return zlib.decompress(raw).decode("utf-8", "surrogatepass")


def packed(texts: Mapping[str, str]) -> tuple[bytes, dict[str, list[tuple[int, int]]]]:
    """Every format's compressed chunks, one after another, and each chunk's byte range."""
    parts: list[bytes] = []
    ranges: dict[str, list[tuple[int, int]]] = {}
    at = 0
    for name in sorted(texts):
        ranges[name] = []
        for chunk in _chunks(texts[name]):
            parts.append(chunk)
            ranges[name].append((at, at + len(chunk)))
            at += len(chunk)
    return b"".join(parts), ranges


@dataclass(frozen=True)
class Keeping:
    """A fetched document ready to keep: its digest, and the keep's keys and arguments (in
    KEEP_FUNCTION's order)."""

    store: KeptDocuments
    digest: str
    url: str
    nbytes: int  # the stored document's (record and compressed text)
    keys: list[str]
    args: list[bytes | int | str]

    async def keep(self) -> bool:
        """Keep it on its own (no page flight to end with it); True when kept."""
        return await self.store._keep_alone(self)


class KeptDocuments:
    def __init__(self, redis: Redis, *, ttl_s: int, queue_name: str, clock: RedisClock | None = None) -> None:
        self._redis = redis
        self.clock = clock or RedisClock(redis)
        self._room = CacheRoom(redis, queue_name)
        self._ttl_s = ttl_s
        self._queue = queue_name
        self._keep = redis.register_script(KEEP_SCRIPT)
        self._bookkeeping = Renewals(BOOKKEEPING_RENEW_S)

    async def prepare(
        self,
        page: Page,
        texts: Mapping[str, str],
        page_offsets: Mapping[str, Sequence[int] | None],
        *,
        noted_for: tuple[str, str, str],
    ) -> Keeping:
        """A fetched document made ready to keep, noted as read by ``noted_for`` (report id,
        extract, URL) in the same step: the page cache keeps it as its flight ends (or
        ``Keeping.keep`` alone, with the cache off)."""
        # Compressing a few MB takes tens of ms: off the event loop (zlib releases the GIL).
        body, ranges = await asyncio.to_thread(packed, texts)
        meta = {
            "v": VERSION,
            "page": orjson.loads(page_entry.encode(replace(page, text=""))),
            "layouts": {
                name: {
                    "total": len(text),
                    "pages": list(page_offsets.get(name) or []) or None,
                    "chunks": ranges[name],
                }
                for name, text in sorted(texts.items())
            },
        }
        record = orjson.dumps(meta)
        document = f"{len(record):0{HEADER_BYTES}d}".encode() + record + body
        digest = digest_of(document)
        renew = self._bookkeeping.due()
        return Keeping(
            self,
            digest,
            page.url,
            len(document),
            keys=[
                keys.document(digest),
                keys.document_index(self._queue),
                keys.document_bytes(self._queue),
                keys.document_note(*noted_for),
            ],
            args=[
                document,
                self._ttl_s * 1000,
                MAX_DOCUMENT_BYTES,
                MAX_EVICTIONS,
                digest,
                self._ttl_s * 1000 + int(2 * BOOKKEEPING_RENEW_S * 1000),
                int(renew),
            ],
        )

    def failed(self, keeping: Keeping, exc: BaseException) -> None:
        """The keep did not run (Redis refused it, or was away): said once, its renewal given back."""
        if keeping.args[-1] == 1:
            self._bookkeeping.failed()
        log.warning(
            "a fetched document could not be kept for continuations",
            extra=fields(url=keeping.url, bytes=keeping.nbytes, error=type(exc).__name__),
        )

    async def _keep_alone(self, keeping: Keeping) -> bool:
        _, room = await self._room.limits(MAX_DOCUMENT_BYTES)
        args = [*keeping.args, await self.clock.now_ms(), "" if room is None else room]
        try:
            kept = await relieving(self._redis, self._queue, lambda: self._keep(keys=keeping.keys, args=args))
        except (RedisError, OSError) as exc:
            self.failed(keeping, exc)
            return False
        return bool(kept)

    async def remember(self, report_id: str, extract: str, url: str, digest: str) -> None:
        """Note that this report read ``digest`` for (extract, url), for the report's window."""
        try:
            await self._redis.set(keys.document_note(report_id, extract, url), digest, ex=self._ttl_s)
        except (RedisError, OSError) as exc:
            log.warning("a report's kept document could not be noted", extra=fields(error=type(exc).__name__))

    async def lookup(self, report_id: str, extract: str, url: str) -> Kept | Gone | None:
        """The document this report read for (extract, url); GONE when no longer kept; None when the
        report never fetched it."""
        digest = await self._redis.get(keys.document_note(report_id, extract, url))
        if digest is None:
            return None
        kept = await self.lookup_digest(digest.decode() if isinstance(digest, bytes) else str(digest))
        return kept if kept is not None else GONE

    async def lookup_digest(self, digest: str) -> Kept | None:
        """The document's record, read from its head (a second read only for a long record)."""
        key = keys.document(digest)
        head = bytes(await self._redis.getrange(key, 0, HEAD_BYTES - 1))
        length = head[:HEADER_BYTES]
        if len(length) != HEADER_BYTES or not length.isdigit():
            return None  # gone (or not a document this worker wrote)
        end = HEADER_BYTES + int(length)
        if end > len(head):
            head += bytes(await self._redis.getrange(key, len(head), end - 1))
            if len(head) < end:
                return None
        kept = _kept(digest, head[HEADER_BYTES:end])
        return replace(kept, base=end) if kept is not None else None

    async def text(self, kept: Kept, name: str, start: int, end: int) -> str | None:
        """Characters ``[start, end)`` of the document's text in format ``name``; None when gone."""
        if end <= start:
            return ""
        chunks = kept.layouts[name].chunks
        first, last = start // CHUNK_CHARS, (end - 1) // CHUNK_CHARS
        if last >= len(chunks):
            return None
        low, high = chunks[first][0], chunks[last][1]
        raw = await self._redis.getrange(keys.document(kept.digest), kept.base + low, kept.base + high - 1)
        if len(raw) != high - low:
            return None  # shed or expired since the record was read
        try:
            joined = "".join(_chunk_text(raw[a - low : b - low]) for a, b in chunks[first : last + 1])
        except (zlib.error, UnicodeDecodeError):
            return None
        return joined[start - first * CHUNK_CHARS : end - first * CHUNK_CHARS]


def _kept(digest: str, raw: bytes) -> Kept | None:
    """Redis is shared state: a record of any other shape is no document at all."""
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
        if not isinstance(value, dict):
            return None
        total, pages, chunks = value.get("total"), value.get("pages"), value.get("chunks")
        if type(total) is not int or total < 0:
            return None
        if pages is not None and not (isinstance(pages, list) and all(type(p) is int for p in pages)):
            return None
        if not (
            isinstance(chunks, list)
            and all(isinstance(c, list) and len(c) == 2 and all(type(x) is int for x in c) for c in chunks)
        ):
            return None
        ranges = tuple((int(a), int(b)) for a, b in chunks)
        layouts[str(name)] = Layout(total, tuple(pages) if pages is not None else None, ranges)
    return Kept(digest, page, layouts)
