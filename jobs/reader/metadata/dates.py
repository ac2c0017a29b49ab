"""Declared dates to ISO 8601, or to nothing when they are not dates a page could mean.

Pages write dates every way: ISO 8601 with or without a time and zone, RFC 2822
("Fri, 01 Mar 2024 10:00:00 GMT"), "March 1, 2025", "1 March 2025", "2024/03/01", "20240301", and
PDF's "D:20240301120000+01'00'". The result is "2024-03-01" for a date alone, or
"2024-03-01T12:00:00+01:00" ("Z" for UTC) with the zone when one was given, with none when not.
A date before the floor (1990 for web pages) or more than a day in the future is dropped: a page
that says 0000-00-00, 99999-01-01 or 2099 declares nothing usable.
"""

from __future__ import annotations

import datetime as dt
import re

WEB_FLOOR = 1990
PDF_FLOOR = 1980  # PDF 1.0 is from 1993, but a scan of an older paper may carry a date from before
MAX_DATE_CHARS = 64

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("jan", "january", "janvier", "januar", "enero"),
            ("feb", "february", "février", "fevrier", "februar", "febrero"),
            ("mar", "march", "mars", "märz", "marz", "marzo"),
            ("apr", "april", "avril", "abril"),
            ("may", "mai", "mayo"),
            ("jun", "june", "juin", "juni", "junio"),
            ("jul", "july", "juillet", "juli", "julio"),
            ("aug", "august", "août", "aout", "agosto"),
            ("sep", "sept", "september", "septembre", "septiembre"),
            ("oct", "october", "octobre", "oktober", "octubre"),
            ("nov", "november", "novembre", "noviembre"),
            ("dec", "december", "décembre", "decembre", "dezember", "diciembre"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "|".join(sorted((re.escape(name) for name in _MONTHS), key=len, reverse=True))
_ZONE = r"(?P<zone>Z|z|UTC|GMT|[+-]\d{2}(?::?\d{2})?)?"
_ISO = re.compile(
    r"(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})"
    r"(?:[T ](?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2})(?:[.,]\d+)?)?\s*" + _ZONE + r")?",
)
_SLASHED = re.compile(r"(?P<y>\d{4})[/.](?P<m>\d{1,2})[/.](?P<d>\d{1,2})\b")
_COMPACT = re.compile(r"(?P<y>\d{4})(?P<m>\d{2})(?P<d>\d{2})(?:T?(?P<H>\d{2})(?P<M>\d{2})(?P<S>\d{2})?)?")
_PDF = re.compile(
    r"D:(?P<y>\d{4})(?P<m>\d{2})(?P<d>\d{2})(?P<H>\d{2})?(?P<M>\d{2})?(?P<S>\d{2})?"
    r"(?P<zone>Z|[+-]\d{2}(?:'?\d{2}'?)?)?"
)
_MONTH_FIRST = re.compile(
    rf"\b(?P<mon>{_MONTH})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{4}})\b", re.I
)
_DAY_FIRST = re.compile(
    rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\.?\s+(?P<mon>{_MONTH})\.?,?\s+(?P<y>\d{{4}})\b", re.I
)
# PubMed's and many journals' "2023 Jan 7" (citation_publication_date), and "2023 January 7".
_YEAR_FIRST = re.compile(rf"\b(?P<y>\d{{4}})\s+(?P<mon>{_MONTH})\.?\s+(?P<d>\d{{1,2}})\b", re.I)
# Day, month, year with dots, as most of Europe writes it in a byline ("07.01.2023"); slashed
# dates are left alone, since 01/07/2023 is a different day in the United States.
_DOTTED = re.compile(r"(?<![\d.])(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<y>\d{4})(?![\d.]\d)")
_TIME_AFTER = re.compile(r"\s+(?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2}))?\s*" + _ZONE)


def iso_date(raw: object, *, floor: int = WEB_FLOOR, now: dt.datetime | None = None) -> str | None:
    """``raw`` as an ISO 8601 date or date-time, or None when it is no plausible date."""
    if not isinstance(raw, str):
        return None
    text = raw.strip()[:MAX_DATE_CHARS]
    parsed = _parse(text)
    if parsed is None:
        return None
    moment, has_time, zone = parsed
    if moment.year < floor:
        return None
    now = now or dt.datetime.now(dt.UTC)
    aware = moment.replace(tzinfo=zone or dt.UTC)
    if aware - now > dt.timedelta(days=1):
        return None
    if not has_time:
        return moment.date().isoformat()
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if zone is None:
        return stamp
    offset = zone.utcoffset(None)
    if not offset:
        return stamp + "Z"
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    return f"{stamp}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def date_in_text(text: str, *, now: dt.datetime | None = None) -> str | None:
    """The first date written in words or as ISO in a short text (a byline), or None."""
    for pattern in (_MONTH_FIRST, _DAY_FIRST, _YEAR_FIRST, _ISO, _SLASHED, _DOTTED):
        match = pattern.search(text[: MAX_DATE_CHARS * 4])
        if match is not None:
            found = iso_date(match.group(0), now=now)
            if found is not None:
                return found
    return None


def _parse(text: str) -> tuple[dt.datetime, bool, dt.timezone | None] | None:
    for pattern in (_PDF, _ISO, _COMPACT, _SLASHED):
        match = pattern.fullmatch(text)
        if match is not None:
            return _build(match.groupdict())
    match = _DOTTED.fullmatch(text)
    if match is not None:
        return _build(match.groupdict())
    for pattern in (_MONTH_FIRST, _DAY_FIRST, _YEAR_FIRST):
        match = pattern.match(text) or pattern.search(text)
        if match is not None:
            parts = match.groupdict()
            parts["m"] = str(_MONTHS[parts.pop("mon").lower()])
            after = _TIME_AFTER.match(text, match.end())
            if after is not None:
                parts.update(after.groupdict())
            return _build(parts)
    return _rfc2822(text)


def _build(parts: dict[str, str | None]) -> tuple[dt.datetime, bool, dt.timezone | None] | None:
    def number(name: str, default: int) -> int:
        value = parts.get(name)
        return int(value) if value else default

    has_time = bool(parts.get("H"))
    try:
        moment = dt.datetime(
            number("y", 0),
            number("m", 1),
            number("d", 1),
            number("H", 0),
            number("M", 0),
            number("S", 0),
        )
    except ValueError:
        return None  # year 0, month 13, February 30, hour 25...
    zone = _zone(parts.get("zone")) if has_time else None
    if zone is _IMPOSSIBLE:
        return None  # "+99:00": the page's moment is unknowable, and a time without its zone would lie
    return moment, has_time, zone


# A zone no place on Earth keeps (beyond +-14:00, or 60 minutes and more).
_IMPOSSIBLE = dt.timezone(dt.timedelta(minutes=1), "impossible")


def _zone(raw: str | None) -> dt.timezone | None:
    if not raw:
        return None
    if raw in ("Z", "z", "UTC", "GMT"):
        return dt.UTC
    digits = raw[1:].replace(":", "").replace("'", "")
    hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
    if hours > 14 or minutes > 59 or (hours == 14 and minutes):
        return _IMPOSSIBLE
    delta = dt.timedelta(hours=hours, minutes=minutes)
    return dt.timezone(-delta if raw[0] == "-" else delta)


_RFC2822 = re.compile(
    rf"(?:[A-Za-z]{{3}},\s*)?(?P<d>\d{{1,2}})\s+(?P<mon>{_MONTH})\s+(?P<y>\d{{4}})"
    r"(?:\s+(?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2}))?\s*" + _ZONE + r")?",
    re.I,
)


def _rfc2822(text: str) -> tuple[dt.datetime, bool, dt.timezone | None] | None:
    match = _RFC2822.fullmatch(text)
    if match is None:
        return None
    parts = match.groupdict()
    parts["m"] = str(_MONTHS[parts.pop("mon").lower()])
    return _build(parts)
