"""Retry-After, read the way a careful client reads it: seconds or an HTTP date, or no hint at all.

The header comes from a server (a page's host, the search provider), so it is hostile input: a
date far in the future, a number of seconds beyond any float, a date the parser overflows on, or
text that is neither. Anything unreadable is "no hint", never an exception, and what is read is
capped, so no server can tell a worker to wait for a year.
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
_SECONDS = re.compile(r"-?[0-9]{1,12}(?:\.[0-9]{1,9})?")


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
