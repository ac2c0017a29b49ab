"""Values read from Redis, decoded defensively: whatever a key holds, these return a plain value.

Everything the dashboard reads was written by code that handles untrusted input, or by something
else entirely, so a wrong type, a pickle or garbage becomes an empty value, never an exception.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

from worker.serialization import loads


def json_object(raw: object) -> dict[str, Any]:
    """An orjson object, or {} for anything else (a pickle, a plain string, garbage)."""
    if not isinstance(raw, (bytes, str)):
        return {}
    with contextlib.suppress(ValueError):
        value = loads(raw.encode() if isinstance(raw, str) else raw)
        if isinstance(value, dict):
            return value
    return {}


def text(raw: object) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def short(value: object, limit: int) -> str:
    shown = text(value)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def short_or_none(value: object, limit: int) -> str | None:
    return None if value is None else short(value, limit)


def number(value: object) -> float | None:
    """A finite number, from a number or its text; None for anything else (booleans included)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        found = float(value)
    elif isinstance(value, (bytes, str)):
        try:
            found = float(value)
        except ValueError:
            return None
    else:
        return None
    return found if math.isfinite(found) else None


def integer_or_none(value: object) -> int | None:
    found = number(value)
    return int(found) if found is not None else None


def integer(value: object) -> int:
    return integer_or_none(value) or 0


def flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None
