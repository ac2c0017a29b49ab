"""The settings that change what a job returns, as every worker on a queue publishes them.

Workers on one queue take its jobs at random. Two of them with different guardian ranges, caps,
budgets or providers give one report different answers for the same call (a README's worker and a
tour's worker on one machine refused a third of the tour's fetches, and nothing named the worker
that refused). So each health beat carries this fingerprint, ``research-worker run`` warns when
it joins a queue whose workers publish another, and the dashboard shows which settings differ.

Only what is safe to show is published, since anyone who reads Redis reads it: a secret as
``set`` or ``unset``, an organization's key by its org id only, a URL without its password, a CA
bundle by the SHA-256 of its content (the same path may hold another file on another host).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from worker.config import ArchiveBucket, ArchiveDirectory, Settings, redact_url
from worker.state import health

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger("research.fingerprint")

FIELD = "settings"  # the health beat's field that holds the fingerprint
MAX_NAMES = 100
MAX_VALUE_CHARS = 300
SET, UNSET = "set", "unset"


@dataclass(frozen=True)
class Fingerprint:
    digest: str
    values: Mapping[str, str]  # variable name -> the value as shown


def values_of(settings: Settings) -> dict[str, str]:
    """Each setting that changes a job's result, by its variable's name, as it may be shown."""
    shown: dict[str, object] = {
        "RESEARCH_GUARDIAN_ALLOW_CIDRS": ",".join(str(net) for net in settings.guardian_allow_cidrs),
        "RESEARCH_CA_BUNDLE": _file_digest(settings.ca_bundle),
        "RESEARCH_URL_MENU": "on" if settings.url_menu else "off",
        "RESEARCH_BLOCKED_DOMAINS": ",".join(sorted(settings.blocked_domains)),
        "RESEARCH_ALLOWED_DOMAINS": ",".join(sorted(settings.allowed_domains)),
        "RESEARCH_ROBOTS": "on" if settings.robots else "off",
        "RESEARCH_RENDER": settings.render.value,
        "RESEARCH_RENDER_BUDGET": settings.render_budget,
        "RESEARCH_OCR": "on" if settings.ocr else "off",
        "RESEARCH_OCR_LANGUAGES": settings.ocr_languages,
        "RESEARCH_OCR_BUDGET_PAGES": settings.ocr_budget_pages,
        # Where evidence goes decides ``archived``; the kind and place, never credentials.
        "RESEARCH_ARCHIVE": archive_of(settings),
        "RESEARCH_READ_BUDGET_CHARS": settings.read_budget_chars,
        "RESEARCH_SEARCH_BUDGET": settings.search_budget,
        "RESEARCH_FETCH_BUDGET": settings.fetch_budget,
        "RESEARCH_BUDGET_WINDOW_S": settings.budget_window_s,
        "RESEARCH_FETCH_MAX_BYTES": settings.fetch_max_bytes,
        "RESEARCH_FETCH_MAX_PDF_BYTES": settings.fetch_max_pdf_bytes,
        "RESEARCH_FETCH_MAX_CHARS": settings.fetch_max_chars,
        "RESEARCH_FETCH_MAX_REDIRECTS": settings.fetch_max_redirects,
        "RESEARCH_FETCH_TIMEOUT_S": settings.fetch_timeout_s,
        "RESEARCH_SEARCH_TIMEOUT_S": settings.search_timeout_s,
        "RESEARCH_REDUCE_CPU_BUDGET_S": settings.reduce_cpu_budget_s,
        "RESEARCH_RESULT_TTL_S": settings.result_ttl_s,
        "RESEARCH_CACHE_TTL_S": settings.cache_ttl_s,
        "RESEARCH_USER_AGENT": settings.user_agent,
        "RESEARCH_SEARCH_PROVIDER": settings.search_provider.value,
        "RESEARCH_SEARCH_FALLBACK": settings.search_fallback.value if settings.search_fallback else "",
        "RESEARCH_SEARCH_ENGINE": settings.search_engine or "",
        "RESEARCH_SEARCH_MODEL": settings.search_model,
        "SEARXNG_URL": redact_url(settings.searxng_url) if settings.searxng_url else "",
        "OPENROUTER_BASE_URL": redact_url(settings.openrouter_base_url),
        "OPENROUTER_API_KEY": SET if settings.openrouter_api_key else UNSET,
        "RESEARCH_ORG_KEYS_FILE": ",".join(sorted(settings.org_keys)),  # the org ids, never a key
        # Each worker charges the organization's day with its own caps: they must agree.
        "RESEARCH_ORG_DAILY_SEARCHES": settings.org_daily_searches or "",
        "RESEARCH_ORG_DAILY_FETCHES": settings.org_daily_fetches or "",
    }
    return {name: str(value) for name, value in shown.items()}


def archive_of(settings: Settings) -> str:
    target = settings.archive
    if isinstance(target, ArchiveBucket):
        return f"s3://{target.bucket}/{target.prefix}"
    if isinstance(target, ArchiveDirectory):
        return "a directory"  # each machine's own: which one is not a difference between workers
    return "off"


def digest_of(values: Mapping[str, str]) -> str:
    return hashlib.sha256(orjson.dumps(dict(values), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def published(settings: Settings) -> dict[str, Any]:
    """What a beat carries under ``FIELD``."""
    values = values_of(settings)
    return {"digest": digest_of(values), "values": values}


def read(info: Mapping[str, Any]) -> Fingerprint | None:
    """A beat's fingerprint, or None when it has none (an older worker, arq's own) or it is not ours."""
    raw = info.get(FIELD)
    if not isinstance(raw, dict):
        return None
    values = raw.get("values")
    if not isinstance(values, dict) or len(values) > MAX_NAMES:
        return None
    kept = {
        str(name)[:MAX_VALUE_CHARS]: str(value)[:MAX_VALUE_CHARS]
        for name, value in values.items()
        if isinstance(name, str) and isinstance(value, str | int | float)
    }
    return Fingerprint(digest_of(kept), kept)


def differing(mine: Mapping[str, str], theirs: Mapping[str, str]) -> list[str]:
    """The names of the settings two fingerprints disagree on (one not publishing a name differs)."""
    return sorted(name for name in mine.keys() | theirs.keys() if mine.get(name) != theirs.get(name))


def disagreements(fingerprints: list[Mapping[str, str]]) -> list[str]:
    """The names of the settings on which the given fingerprints do not all agree."""
    names: set[str] = set()
    for other in fingerprints[1:]:
        names.update(differing(fingerprints[0], other))
    return sorted(names)


async def others_differ(redis: Redis, settings: Settings) -> dict[str, list[str]]:
    """The workers on this queue (not this one) whose fingerprints differ from ``settings``', each
    with the names of the settings that differ."""
    mine = values_of(settings)
    found: dict[str, list[str]] = {}
    for replica in await health.replicas(redis, settings.queue_name):
        if replica.worker_id == settings.worker_id:
            continue
        theirs = read(replica.info)
        if theirs is None:
            continue  # an older worker publishes none: nothing to compare, nothing to claim
        names = differing(mine, theirs.values)
        if names:
            found[replica.worker_id] = names
    return found


def _file_digest(path: str | None) -> str:
    if path is None:
        return ""
    try:
        with open(path, "rb") as handle:
            return "sha256:" + hashlib.sha256(handle.read()).hexdigest()[:16]
    except OSError:
        return "unreadable"
