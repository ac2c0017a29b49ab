"""The contract's result objects: typed, built here and only here, and written with their TTL and a
wake-up for the client that waits on them.

A tool returns the fields of its own result (``FetchPage``, ``WebSearch``); ``ok_result`` and
``error_result`` put the common head on them. What travels through Redis is the JSON of these.

Every string they put in a result is valid UTF-8 by construction: Python strings can hold lone
surrogates (a server's undecodable byte kept by ``surrogateescape``, a ``\\udc80`` escape) that no
UTF-8 can carry, orjson refuses them, and a result that cannot be serialized is a lost result.
They become U+FFFD here. The first result written for a job is the one that stands: a worker that
lost the job's lease and finishes late finds it written and writes nothing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from worker.errors import ErrorKind, ResearchError
from worker.page_metadata import PageMetadata
from worker.serialization import dumps, loads_object
from worker.state import activity, keys
from worker.state.queue import blocking_peek

if TYPE_CHECKING:
    from redis.asyncio import Redis

# The wake-up list carries a copy of the result so a waiting client needs no second round trip;
# it is short-lived because only a client already waiting (or about to) needs it: a later reader
# reads the result key.
DONE_TTL_MS = 60_000
OK = "ok"
# An error message is a sentence or two for the model; a longer one is a bug, not information.
MAX_MESSAGE_CHARS = 1000
SURROGATES = re.compile("[\ud800-\udfff]")


class Citation(TypedDict):
    title: str
    url: str
    snippet: str


class WebSearch(TypedDict):
    """What web_search adds to an ok result."""

    query: str
    results: list[Citation]
    provider: str
    archived: NotRequired[bool]  # the provider's answer is in the evidence archive
    archive_record: NotRequired[str | None]


class FetchPage(TypedDict):
    """What fetch_page adds to an ok result."""

    url: str  # the canonical form of the URL asked for
    final_url: str
    status: int
    content_type: str
    title: str
    text: str
    truncated: bool
    redirects: int
    bytes_read: int
    fetched_at: str  # UTC, to the second; the original fetch time when served from the cache
    extraction: str  # "main" or "full"
    links: list[str]
    hidden_removed: int
    cached: bool
    format: NotRequired[str]  # "markdown" or "text": the format of ``text``
    sha256: str  # of the body the reader read (decoded, within the byte cap)
    archived: bool  # the exchange is in the evidence archive (worker.archive)
    archive_record: str | None  # its WARC record id; a cache hit names the original fetch's
    rendered: bool  # a browser rendered the page for this result
    script_shell: bool  # nearly empty because its scripts build it, and it was not rendered
    pages: NotRequired[int]  # PDFs only
    pages_read: NotRequired[int]  # PDFs only
    offset: NotRequired[int]  # where ``text`` starts in the whole document's text
    total_chars: NotRequired[int]  # the whole document's text, in this format
    next_offset: NotRequired[int | None]  # where the next piece starts; None at the end
    page_offsets: NotRequired[list[int]]  # PDFs only: where each page starts in the whole text
    matches: NotRequired[list[Match]]  # with ``find`` only; ``text`` is then ""
    refetched: NotRequired[bool]  # a continuation whose kept document was gone, fetched again
    metadata: NotRequired[PageMetadata]  # HTML and PDFs: declared by the page, so it may lie


class Match(TypedDict):
    offset: int  # where the match starts in the whole text
    snippet: str


class ErrorDetail(TypedDict):
    kind: str
    message: str


class About(TypedDict, total=False):
    """What a job was about, carried by its result even when it failed."""

    url: str
    query: str


class ErrorResult(TypedDict):
    ok: bool
    tool: str
    report_id: str | None
    job_id: str
    error: ErrorDetail
    url: NotRequired[str]
    query: NotRequired[str]
    status: NotRequired[int | None]


# A result as it travels: the head (ok, tool, report_id, job_id) and a tool's fields, or an error.
Result = dict[str, Any]


def ok_result(tool: str, report_id: str, job_id: str, fields: Mapping[str, Any]) -> Result:
    return {"ok": True, "tool": tool, "report_id": report_id, "job_id": job_id, **clean(dict(fields))}


def error_result(
    tool: str, report_id: str | None, job_id: str, error: ResearchError, about: About | None = None
) -> Result:
    result: ErrorResult = {
        "ok": False,
        "tool": tool,
        "report_id": report_id,
        "job_id": job_id,
        "error": {"kind": error.kind.value, "message": clean_text(error.message[:MAX_MESSAGE_CHARS])},
    }
    if about is not None:
        if "url" in about:
            result["url"] = clean_text(about["url"])
        if "query" in about:
            result["query"] = clean_text(about["query"])
    if error.status is not None or error.kind is ErrorKind.HTTP_STATUS:
        result["status"] = error.status
    return dict(result)


def unstored_result(tool: str, report_id: str | None, job_id: str) -> Result:
    """What stands in for a result that could not be written: the job's identity and a kind."""
    return {
        "ok": False,
        "tool": tool,
        "report_id": report_id,
        "job_id": job_id,
        "error": {
            "kind": ErrorKind.INTERNAL_ERROR.value,
            "message": "the worker finished this job but could not store its result",
        },
    }


def clean_text(value: str) -> str:
    """The string with every surrogate code point replaced by U+FFFD: encodable as UTF-8."""
    return SURROGATES.sub("\ufffd", value) if SURROGATES.search(value) else value


def clean(value: Any) -> Any:
    """Strings anywhere in a result's fields (dict keys, lists, nested objects) made valid UTF-8."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(item) for item in value]
    return value


def outcome(result: Mapping[str, Any]) -> str:
    """'ok' or the error kind: the label logs, metrics and the dashboard use."""
    if result.get("ok"):
        return OK
    error = result.get("error")
    return str(error.get("kind")) if isinstance(error, dict) else ErrorKind.INTERNAL_ERROR.value


# KEYS: the result, its wake-up list, the queue's recent list. ARGV: the result, its TTL ms, the
# wake-up's TTL ms, the dashboard's line, the recent list's length, the slack before it is cut.
# Returns nil when this write stands, else the result that was there first. SET NX is the
# first-wins write (the standing result is read only when there is one); the wake-up and the line
# go with it, in the same atomic step, and only with the write that stands. (SET NX GET would
# read and write in one command, but only from Redis 7.0; the embedded Redis is 6.2.)
WRITE_SCRIPT = """
if not redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then
  return redis.call('GET', KEYS[1])
end
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
if redis.call('LPUSH', KEYS[3], ARGV[4]) > tonumber(ARGV[5]) + tonumber(ARGV[6]) then
  redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[5]) - 1)
end
return false
"""


class ResultStore:
    def __init__(self, redis: Redis, *, ttl_s: int, queue_name: str) -> None:
        self._redis = redis
        self._ttl_ms = ttl_s * 1000
        self._queue_name = queue_name
        self._script = redis.register_script(WRITE_SCRIPT)
        self.buckets = activity.Buckets(redis, queue_name)

    async def write(
        self, result: Result, duration_ms: float, run: activity.JobRun | None = None
    ) -> Result | None:
        """Write the job's result unless one is written already; None when this write stands, else
        the result that was there first.

        Result, wake-up and dashboard line go in one script, only with the first write; the
        minute counters follow in this worker's next bucket write. Serialization errors raise
        before anything is sent.
        """
        job_id = str(result["job_id"])
        payload = dumps(result)
        at = time.time()
        kind = outcome(result)
        standing = await self._script(
            keys=[keys.result(job_id), keys.done(job_id), keys.recent(self._queue_name)],
            args=[
                payload,
                self._ttl_ms,
                min(self._ttl_ms, DONE_TTL_MS),
                dumps(activity.line(result, kind, duration_ms, run, at)),
                activity.RECENT_LIMIT,
                activity.RECENT_SLACK,
            ],
        )
        if standing is None:
            self.buckets.add(
                at,
                activity.counters(result, kind, duration_ms, run),
                activity.slowest(result, duration_ms, run),
            )
            return None
        return decode(bytes(standing)) or unstored_result(
            str(result.get("tool")), result.get("report_id"), job_id
        )

    async def read(self, job_id: str) -> Result | None:
        return decode(await self._redis.get(keys.result(job_id)))

    async def wait(self, job_id: str, timeout_s: float) -> Result | None:
        """Block until the job's result is written (or the time runs out); no polling."""
        return decode(await blocking_peek(self._redis, keys.done(job_id), timeout_s))


def decode(raw: bytes | None) -> Result | None:
    return loads_object(raw)
