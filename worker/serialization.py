"""orjson for job payloads and results, on the pool and the worker alike; pickle never."""

from __future__ import annotations

from typing import Any, TypeAlias

import orjson

# A JSON document as Python holds it once read: what the faces hand their callers.
JsonValue: TypeAlias = "str | int | float | bool | list[JsonValue] | dict[str, JsonValue] | None"
JsonObject: TypeAlias = "dict[str, JsonValue]"
# A job's keyword arguments as a caller or arq hands them: any JSON at all, which each tool's own
# parser reads and refuses (so loosely typed here on purpose, and in this one place).
JobArguments: TypeAlias = dict[str, Any]


def _fallback(value: object) -> object:
    # arq serializes a failed job's exception as its result; keep its text, never its object.
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=_fallback, option=orjson.OPT_NON_STR_KEYS)


def loads(data: bytes) -> Any:
    """Decode a payload; a pickle (or anything that is not JSON) raises, it is never loaded."""
    return orjson.loads(data)


def loads_object(data: bytes | None) -> JsonObject | None:
    """A JSON object read back, or None for nothing, for text that is not JSON, or another value."""
    if not data:
        return None
    try:
        value = loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
