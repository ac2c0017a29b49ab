"""Record ids, and the store keys they name: nothing a server or a caller chose reaches a key.

A record id is ``urn:uuid:`` and a UUID version 7, whose first 48 bits are the milliseconds since
the epoch: the id alone says which day's folder holds its file (``records/YYYY-MM-DD/<uuid>.warc.gz``),
so a cache hit or a continuation needs nothing but the id to find the original fetch again, and
retention deletes whole day folders. Ids read back from shared state (a page cache entry, the
report index) are parsed strictly; anything else is no id, so no path trick (``../``, NUL, a long
URL) can become a key.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
import uuid

URN = "urn:uuid:"
_ID = re.compile(r"urn:uuid:([0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})")
RECORDS = "records/"
SUFFIX = ".warc.gz"


def new_record_id(now_s: float | None = None) -> str:
    """A fresh record id (UUID version 7: time-ordered, so a day's files sort by time)."""
    ms = int((time.time() if now_s is None else now_s) * 1000) & ((1 << 48) - 1)
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms << 80) | (0x7 << 76) | ((rand >> 62) & 0xFFF) << 64 | (0b10 << 62) | (rand & ((1 << 62) - 1))
    return f"{URN}{uuid.UUID(int=value)}"


def parse_record_id(value: object) -> str | None:
    """The id when ``value`` is one this worker makes, else None."""
    if isinstance(value, str) and _ID.fullmatch(value):
        return value
    return None


def day_of(record_id: str) -> str:
    """The UTC day (``YYYY-MM-DD``) the record was made on, from the id's own clock."""
    ms = uuid.UUID(record_id.removeprefix(URN)).int >> 80
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d")


def file_key(record_id: str) -> str:
    """The store key of the file a record id names (the id must have passed ``parse_record_id``)."""
    return f"{RECORDS}{day_of(record_id)}/{record_id.removeprefix(URN)}{SUFFIX}"


def digest_name(payload_digest: str) -> str:
    """A payload digest (``sha1:BASE32``, as warcio writes it) as a name of letters and digits only."""
    algorithm, _, value = payload_digest.partition(":")
    if algorithm != "sha1" or not re.fullmatch(r"[A-Z2-7]{32}", value):
        raise ValueError("not a sha1 payload digest")
    return value
