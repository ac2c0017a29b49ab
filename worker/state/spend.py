"""Search spend: what each search cost, per organization, usage source and UTC day, and per report.

The provider reports each completion's cost (USD) and token counts; every search adds them to two
Redis hashes in one transaction (so neither is ever seen without the other): the organization's
day, which finance and the dashboard read, and the report's, which ``research-worker budget``
shows beside the budget counters. Each hash also counts searches per provider that answered
(``searches_by:<provider>``), so a day served partly by a fallback says so. These are attribution
counters, not the bill: the provider's own accounting stays the record, so a counter that cannot
be written is logged, never a failed search that was already paid for. A free provider (SearXNG)
records nothing here.

The provider's figures are hostile input like the rest of its answer: a cost of 1e308 would make
a day's sum infinite, and a token count past 2**63 makes Redis refuse one increment of the
transaction while the others apply. ``Spend`` holds only plausible figures (``read_spend`` turns
an implausible one into zero and logs it), so stored sums stay finite and a write is all or none.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from redis.exceptions import RedisError

from worker.logs import fields
from worker.state import keys

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from worker.config import Settings
    from worker.metrics import Metrics

log = logging.getLogger("research.spend")


class Recorder(Protocol):
    """What recording a search needs of the runtime (state does not import the runtime)."""

    @property
    def redis(self) -> Redis: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def metrics(self) -> Metrics: ...


# Searches without an org id are attributed to this name. It cannot collide with a real org id:
# those are validated to letters, digits and -_.: only, and parentheses are not among them.
NO_ORG = "(none)"
# The metrics label of an org the key file does not list: any caller may name any org id, and
# each distinct label is a new series on every scrape, so only the operator's orgs get their own.
OTHER_ORG = "(other)"
# An organization's day stays long enough to look back over a full calendar month.
ORG_DAY_TTL_S = 35 * 86_400
# A report's spend outlives its budget window by enough to review last week's reports.
REPORT_MIN_TTL_S = 7 * 86_400
# One search costs cents and a few thousand tokens; past these a figure is a provider's bug or a
# relayed lie, never a price. Both stay far below where float sums or Redis integers break.
MAX_SEARCH_COST_USD = 100.0
MAX_SEARCH_TOKENS = 10_000_000

BY_PROVIDER = "searches_by:"


class Counters(TypedDict):
    """What a report or an organization day has spent, as ``report_spend`` reads it."""

    cost_usd: float
    prompt_tokens: int
    completion_tokens: int
    searches: int
    by_provider: dict[str, int]


class OrgDay(Counters):
    """One organization's spend on one UTC day under one usage source (``org_days``)."""

    day: str
    org_id: str
    usage_source: str


@dataclass(frozen=True)
class Spend:
    """One completion's usage, every figure finite, non-negative and plausible for one search."""

    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __post_init__(self) -> None:
        if _cost(self.cost_usd) is None:
            raise ValueError("cost_usd is not a plausible cost for one search")
        for name in ("prompt_tokens", "completion_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or _tokens(value) is None:
                raise ValueError(f"{name} is not a plausible token count for one search")


def read_spend(cost_usd: object, prompt_tokens: object, completion_tokens: object) -> Spend:
    """A ``Spend`` from a provider's figures, each one zero when missing or implausible (logged)."""
    cost = _cost(cost_usd) if cost_usd is not None else 0.0
    prompt = _tokens(prompt_tokens) if prompt_tokens is not None else 0
    completion = _tokens(completion_tokens) if completion_tokens is not None else 0
    rejected = [
        name
        for name, value in (("cost", cost), ("prompt_tokens", prompt), ("completion_tokens", completion))
        if value is None
    ]
    if rejected:
        # The figures themselves are not logged: they are the provider's, and may be anything.
        log.warning("implausible usage figures counted as zero", extra=fields(figures=rejected))
    return Spend(cost_usd=cost or 0.0, prompt_tokens=prompt or 0, completion_tokens=completion or 0)


def _cost(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        cost = float(value)
    except OverflowError:  # an integer too large for a float
        return None
    return cost if math.isfinite(cost) and 0.0 <= cost <= MAX_SEARCH_COST_USD else None


def _tokens(value: object) -> int | None:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_SEARCH_TOKENS else None


def metric_org(org_id: str | None, settings: Settings) -> str:
    """The org's metrics label: its id when the key file lists it, else one shared name."""
    if org_id is None:
        return NO_ORG
    return org_id if org_id in settings.org_keys else OTHER_ORG


def utc_day(now: dt.datetime | None = None) -> str:
    return (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).strftime("%Y-%m-%d")


async def record_search(
    runtime: Recorder,
    report_id: str,
    org_id: str | None,
    spend: Spend,
    *,
    provider: str,
    now: dt.datetime | None = None,
) -> None:
    """Add one search, answered by ``provider``, to its organization's day, its report and the metrics."""
    settings = runtime.settings
    org = org_id or NO_ORG
    day = utc_day(now)
    org_key = keys.spend_org_day(org, settings.usage_source, day)
    report_key = keys.spend_report(report_id)
    report_ttl_s = max(settings.budget_window_s, REPORT_MIN_TTL_S)
    try:
        async with runtime.redis.pipeline(transaction=True) as tx:
            for key, ttl_s in ((org_key, ORG_DAY_TTL_S), (report_key, report_ttl_s)):
                tx.hincrbyfloat(key, "cost_usd", spend.cost_usd)
                tx.hincrby(key, "prompt_tokens", spend.prompt_tokens)
                tx.hincrby(key, "completion_tokens", spend.completion_tokens)
                tx.hincrby(key, "searches", 1)
                tx.hincrby(key, f"{BY_PROVIDER}{provider}", 1)
                tx.expire(key, ttl_s)
            # The key's parts, kept as fields so readers never parse ids that may contain ':'.
            tx.hset(org_key, mapping={"org_id": org, "usage_source": settings.usage_source, "day": day})
            await tx.execute()
    except RedisError as exc:
        log.warning(
            "search spend not recorded",
            extra=fields(
                report_id=report_id,
                org_id=org,
                provider=provider,
                cost_usd=spend.cost_usd,
                error=type(exc).__name__,
            ),
        )
    metrics = runtime.metrics
    label = metric_org(org_id, settings)
    metrics.search_cost.labels(label, settings.usage_source).inc(spend.cost_usd)
    metrics.search_tokens.labels(label, settings.usage_source, "prompt").inc(spend.prompt_tokens)
    metrics.search_tokens.labels(label, settings.usage_source, "completion").inc(spend.completion_tokens)


async def report_spend(redis: Redis, report_id: str) -> Counters:
    """``{"cost_usd", "prompt_tokens", "completion_tokens", "searches", "by_provider"}`` for one report.

    Zeros (and an empty ``by_provider``) when the report has spent nothing.
    """
    return _counters(await redis.hgetall(keys.spend_report(report_id)))  # type: ignore[misc]


async def org_days(redis: Redis, names: Sequence[str]) -> list[OrgDay]:
    """The organization days stored at ``names`` (keys listed by ``keys.spend_org_pattern()``).

    Rows come newest day first, then by cost, highest first. Each row: ``day``, ``org_id``,
    ``usage_source`` and the counters of ``report_spend``. A key that is not a spend hash (something
    else wrote under the prefix) is passed over, and a figure that is not a number reads as zero.
    """
    if not names:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.hgetall(name)
        replies = await pipe.execute(raise_on_error=False)
    prefix = keys.spend_org_pattern().removesuffix("*")
    rows: list[OrgDay] = []
    for name, raw in zip(names, replies, strict=True):
        if not isinstance(raw, dict):
            continue
        text = {_text(k): _text(v) for k, v in raw.items()}
        # The hash names its own org, source and day; the key is the fallback, split from the
        # right because the day and the source carry no colon.
        org, source, day = _split_org_key(name.removeprefix(prefix))
        rows.append(
            OrgDay(
                day=text.get("day", day),
                org_id=text.get("org_id", org),
                usage_source=text.get("usage_source", source),
                **_counters(raw),
            )
        )
    rows.sort(key=lambda row: (row["day"], row["cost_usd"]), reverse=True)
    return rows


def _split_org_key(rest: str) -> tuple[str, str, str]:
    parts = rest.rsplit(":", 2)
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    return rest, "", ""


def _counters(raw: dict[Any, Any]) -> Counters:
    text = {_text(k): _text(v) for k, v in raw.items()}
    return Counters(
        cost_usd=round(_figure(text.get("cost_usd")), 10),
        prompt_tokens=int(_figure(text.get("prompt_tokens"))),
        completion_tokens=int(_figure(text.get("completion_tokens"))),
        searches=int(_figure(text.get("searches"))),
        by_provider={
            name.removeprefix(BY_PROVIDER): int(_figure(value))
            for name, value in sorted(text.items())
            if name.startswith(BY_PROVIDER)
        },
    )


def _figure(value: str | None) -> float:
    """A stored counter; zero for a missing one or one something else wrote as garbage."""
    try:
        found = float(value or 0)
    except ValueError:
        return 0.0
    return found if math.isfinite(found) else 0.0


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
