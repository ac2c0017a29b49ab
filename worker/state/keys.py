"""Every Redis key the project writes, each built by one function.

arq's own keys (``arq:job:``, ``arq:in-progress:``, ``arq:result:``, ``arq:retry:``) are arq's; the
ones here are ours. Report ids, job ids and org ids are validated before they reach a key, so a key
can never be steered into another report's namespace.
"""

from __future__ import annotations

import hashlib

from arq.constants import in_progress_key_prefix, job_key_prefix, result_key_prefix, retry_key_prefix

PREFIX = "research:"

# arq's own keys, named here so nothing else concatenates arq's prefixes by hand.
ARQ_IN_PROGRESS = in_progress_key_prefix
ARQ_JOB = job_key_prefix
ARQ_RETRY = retry_key_prefix
ARQ_RESULT = result_key_prefix
# The keys of a job arq has not finished: its claim, its payload, its try counter.
ARQ_JOB_PREFIXES = (ARQ_IN_PROGRESS, ARQ_JOB, ARQ_RETRY)


def arq_job(job_id: str) -> str:
    """arq's payload of a queued job."""
    return ARQ_JOB + job_id


def arq_in_progress(job_id: str) -> str:
    """arq's claim of a running job."""
    return ARQ_IN_PROGRESS + job_id


def arq_in_progress_pattern() -> str:
    """Every running job's claim (arq's job ids hold no glob characters)."""
    return ARQ_IN_PROGRESS + "*"


def arq_retry(job_id: str) -> str:
    """arq's try counter of a job."""
    return ARQ_RETRY + job_id


def arq_result(job_id: str) -> str:
    """arq's record of a finished job."""
    return ARQ_RESULT + job_id


def result(job_id: str) -> str:
    """The contract's result object for one job (orjson, expires with the result TTL)."""
    return f"{PREFIX}result:{job_id}"


def done(job_id: str) -> str:
    """A one-element list pushed with the result, so a waiting client wakes on a blocking pop."""
    return f"{PREFIX}done:{job_id}"


def budget(report_id: str) -> str:
    """A hash per report: a counter per tool plus one field per charged job id."""
    return f"{PREFIX}budget:{report_id}"


def org_day(org_id: str, day: str) -> str:
    """A hash per organization and UTC day: a counter per tool, charged with the report's budget."""
    return f"{PREFIX}orgday:{org_id}:{day}"


def menu(report_id: str) -> str:
    """The set of canonical URLs this report may fetch (the URL menu)."""
    return f"{PREFIX}menu:{report_id}"


def archive_report(report_id: str) -> str:
    """A list per report: the evidence archive record ids its results cite, in fetch order (JSON
    entries; expires with the budget window, refreshed on each entry)."""
    return f"{PREFIX}archive:report:{report_id}"


def archive_pointer(queue_name: str, store_id: str, payload: str) -> str:
    """Where a payload (its SHA-1 in base32) was first stored in one archive store (a hash of the
    store's identity): the original a revisit refers to (JSON, expires with the original's use)."""
    return f"{PREFIX}archive:digest:{queue_name}:{store_id}:{payload}"


def archive_health(queue_name: str, worker_id: str) -> str:
    """One worker's archive state for the dashboard (JSON, refreshed while it writes)."""
    return f"{PREFIX}archive:health:{queue_name}:{worker_id}"


def archive_pending(queue_name: str, worker_id: str) -> str:
    """A hash per worker: the records it accepted (answered ``archived: true``) and has not yet
    stored, record id to report id; a stopped worker's leftovers are its lost records."""
    return f"{PREFIX}archive:pending:{queue_name}:{worker_id}"


def archive_pending_pattern(queue_name: str) -> str:
    return f"{PREFIX}archive:pending:{glob_escape(queue_name)}:*"


def archive_lost(queue_name: str) -> str:
    """A capped list of the records accepted and never stored (JSON: record, report, worker, why)."""
    return f"{PREFIX}archive:lost:{queue_name}"


def archive_lost_count(queue_name: str) -> str:
    """How many records were accepted and never stored, ever (the list above keeps the latest)."""
    return f"{PREFIX}archive:lost-count:{queue_name}"


def archive_health_pattern(queue_name: str) -> str:
    return f"{PREFIX}archive:health:{glob_escape(queue_name)}:*"


def wake(queue_name: str) -> str:
    """Tokens pushed after each enqueue; an idle worker blocks on this list instead of polling."""
    return f"{PREFIX}wake:{queue_name}"


def health(queue_name: str, worker_id: str) -> str:
    """One health key per worker replica, so one replica stopping never hides another."""
    return f"{queue_name}:health-check:{worker_id}"


def health_pattern(queue_name: str) -> str:
    """Every replica's health key on this queue; glob characters in the name match only themselves."""
    return f"{glob_escape(queue_name)}:health-check:*"


def queue_health(queue_name: str) -> str:
    """arq's own health key, one per queue: what ``arq --check`` reads. Every replica refreshes it."""
    return f"{queue_name}:health-check"


def glob_escape(text: str) -> str:
    """``text`` as a literal inside a SCAN MATCH pattern."""
    return "".join(f"\\{ch}" if ch in "*?[]\\" else ch for ch in text)


def recent(queue_name: str) -> str:
    """A capped list of recent outcomes for the dashboard (no page text)."""
    return f"{PREFIX}recent:{queue_name}"


def minute(queue_name: str, minute: int) -> str:
    """Per-minute counters for the dashboard's charts (a hash, expiring on its own): jobs by tool
    and outcome, duration and queue-wait histograms by tool, cache hits, the deepest queue seen.
    ``minute`` counts minutes since the Unix epoch."""
    return f"{PREFIX}minute:{queue_name}:{minute}"


def page(queue_name: str, extract: str, url_digest: str) -> str:
    """One cached page of the shared page cache (orjson: the reduced document, or a brief 404/410),
    by extract mode and the SHA-256 of its canonical URL; it expires with its freshness."""
    return f"{PREFIX}page:{queue_name}:{extract}:{url_digest}"


def page_flight(queue_name: str, extract: str, url_digest: str) -> str:
    """The lease of the one job fetching this page now (its flight token), renewed while it works."""
    return f"{PREFIX}page-flight:{queue_name}:{extract}:{url_digest}"


def page_flight_done(queue_name: str, token: str) -> str:
    """A one-element list holding a flight's outcome, so the jobs waiting on it wake on a blocking
    read; it lives a few seconds."""
    return f"{PREFIX}page-flight-done:{queue_name}:{token}"


def page_index(queue_name: str) -> str:
    """A sorted set of every cached page, as "entry key|its bytes", scored by its expiry (ms): the
    eviction order, and the sizes the total counts."""
    return f"{PREFIX}page-index:{queue_name}"


def page_bytes(queue_name: str) -> str:
    """The total size in bytes of the cached pages (what the cache's memory bound is checked against)."""
    return f"{PREFIX}page-bytes:{queue_name}"


def host_slots(queue_name: str, host: str) -> str:
    """A sorted set of the fetches in flight to one host across all workers: lease tokens scored
    by their expiry (ms)."""
    return f"{PREFIX}host-slots:{queue_name}:{host}"


def host_free(queue_name: str, host: str) -> str:
    """A short list pushed when a slot for the host frees, so a job waiting for it wakes on a pop."""
    return f"{PREFIX}host-free:{queue_name}:{host}"


def host_waiting(queue_name: str, host: str) -> str:
    """A short-lived mark that a job waits for one of the host's slots: releases push a wake-up
    to ``host_free`` only while it is there."""
    return f"{PREFIX}host-waiting:{queue_name}:{host}"


def host_backoffs(queue_name: str) -> str:
    """A sorted set of the hosts that asked to be left alone (429 or 503 with Retry-After), scored
    by the time (ms) until which no worker fetches from them."""
    return f"{PREFIX}host-backoffs:{queue_name}"


def host_backoff_causes(queue_name: str) -> str:
    """A hash: for each host backing off, what started its hold (``status:unix ms``)."""
    return f"{PREFIX}host-backoff-causes:{queue_name}"


def spend_org_day(org_id: str, usage_source: str, day: str) -> str:
    """Search spend per organization, usage source and UTC day."""
    return f"{PREFIX}spend:org:{org_id}:{usage_source}:{day}"


def spend_report(report_id: str) -> str:
    """Search spend of one report."""
    return f"{PREFIX}spend:report:{report_id}"


def spend_org_pattern() -> str:
    return f"{PREFIX}spend:org:*"


def budget_pattern() -> str:
    return f"{PREFIX}budget:*"


def document(digest: str) -> str:
    """A kept document: its record (the page, and per format its length, page offsets and chunk
    ranges) behind a header giving its length, then its whole text in each format as
    zlib-compressed chunks, one after another (a string, indexed and sized like a cached page, and
    shed like one under memory pressure)."""
    return f"{PREFIX}doc:{digest}"


def document_index(queue_name: str) -> str:
    """A sorted set of every kept document's text, as "text key|its bytes", scored by its expiry (ms):
    like the page cache's index, the order documents are dropped in when room is needed."""
    return f"{PREFIX}doc-index:{queue_name}"


def document_bytes(queue_name: str) -> str:
    """The total size in bytes of the kept documents' texts."""
    return f"{PREFIX}doc-bytes:{queue_name}"


def document_note(report_id: str, extract: str, url: str) -> str:
    """Which kept document a report's fetch of (extract, canonical URL) reads from: its digest, a
    string per note, so one SET with its time to live writes it."""
    digest = hashlib.sha256(f"{extract}\n{url}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"{PREFIX}doc-note:{report_id}:{digest}"


def domains(report_id: str) -> str:
    """A report's own domain lists (``allowed``, ``blocked``: orjson lists of canonical domains)."""
    return f"{PREFIX}domains:{report_id}"


def robots(queue_name: str, host: str, port: int) -> str:
    """One site's robots.txt verdicts as read (orjson), shared by the queue's workers for its
    freshness (per queue, as the page cache is: two deployments on one Redis never share one)."""
    return f"{PREFIX}robots:{queue_name}:{host}:{port}"
