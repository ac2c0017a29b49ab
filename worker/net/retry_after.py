"""Retry-After, read the way a careful client reads it: seconds or an HTTP date, or no hint at all.

The header comes from a server (a page's host, the search provider), so it is hostile input: a
date far in the future, a number of seconds beyond any float, a date the parser overflows on, or
text that is neither. Anything unreadable is "no hint", never an exception, and what is read is
capped, so no server can tell a worker to wait for a year. A value too large to be meant (a run of
digits of any length, a date in a year past 9999) is read as the cap, not as no hint: a server
asking for a wait beyond every deadline must be given up on at once, never retried on the
exponential schedule an absent hint gets.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import math
import re

# Longer waits are read as this: past it every caller's deadline has long run out anyway.
MAX_RETRY_AFTER_S = 86_400.0
_MAX_HEADER_CHARS = 100
# Delta-seconds is a non-negative integer; fractions and a sign are read too, as lenient clients do.
# Any number of digits: float() of a hundred digits is finite, and is capped below.
_SECONDS = re.compile(r"-?[0-9]+(?:\.[0-9]*)?")
# Years a datetime can hold; a parsed date outside them is before the epoch of HTTP or far past it.
_LAST_YEAR = 9999


def retry_after_s(value: str | None, now: dt.datetime | None = None) -> float | None:
    """Seconds to wait, from delta-seconds or an HTTP date; None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > _MAX_HEADER_CHARS:
        return None
    if _SECONDS.fullmatch(value):
        seconds = float(value)
    else:
        parsed = _parsed_date(value)
        if parsed is None:
            return None
        if parsed[0] > _LAST_YEAR:
            return MAX_RETRY_AFTER_S  # a date no datetime holds, far past any deadline
        try:
            when = email.utils.parsedate_to_datetime(value)
            if when.tzinfo is None:
                when = when.replace(tzinfo=dt.UTC)
            seconds = (when - (now or dt.datetime.now(dt.UTC))).total_seconds()
        except (TypeError, ValueError, OverflowError, IndexError):
            return None
    if not math.isfinite(seconds):
        return None
    return min(max(0.0, seconds), MAX_RETRY_AFTER_S)


def _parsed_date(value: str) -> tuple[int, ...] | None:
    """The date's fields as the e-mail parser reads them (year first), or None when it is no date."""
    try:
        fields = email.utils.parsedate_tz(value)
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    if fields is None or not isinstance(fields[0], int):
        return None
    return tuple(field or 0 for field in fields[:6])
