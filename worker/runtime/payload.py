"""A queued job's payload, checked before arq acts on it.

arq reads a job as ``{"f": name, "a": args, "k": kwargs, "t": tries, "et": enqueue ms}`` and trusts
the shapes: a name that is a list, an enqueue time that is a string or past the year 9999, a try
count that is text, make it raise outside its own error handling, so the worker's poll loop dies
with every job in flight, and every worker that picks the job up after dies too (a poison pill).
Arguments that are not a list, or keyword arguments that are not an object, fail the job with no
result. Whoever can write to the queue can write such a payload, so each field is checked here,
and a job that fails a check never reaches arq: the worker answers it with ``invalid_request``.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from worker.errors import InvalidRequest, MissingReportId
from worker.serialization import JobArguments, loads

# datetime's range: arq turns the enqueue time into a datetime, which ends with the year 9999.
MAX_ENQUEUE_MS = 253_402_300_799_000
MAX_TRIES_FIELD = 2**31 - 1
SHOWN_NAME_CHARS = 60


@dataclass(frozen=True)
class JobPayload:
    """A payload whose every field arq reads has the shape arq expects."""

    function: str
    args: list[Any]
    kwargs: JobArguments


class MalformedJob(InvalidRequest):
    """A payload arq must not be handed; ``function`` and ``report_id`` are kept when readable,
    so the job's result can still say which tool and report it was for."""

    def __init__(self, message: str, *, function: str | None = None, report_id: str | None = None) -> None:
        super().__init__(message)
        self.function = function
        self.report_id = report_id


def read_payload(raw: bytes, functions: Collection[str]) -> JobPayload:
    """The payload's fields, or ``MalformedJob`` saying in the worker's words what is wrong."""
    try:
        data = loads(raw)
    except ValueError:
        raise MalformedJob(
            "the job payload is not JSON; payloads are read with orjson only (pickle is never loaded)"
        ) from None
    if not isinstance(data, dict) or not {"f", "a", "k", "t", "et"} <= data.keys():
        raise MalformedJob("the job payload is not an arq job: an object with f, a, k, t and et")
    function, args, kwargs = data["f"], data["a"], data["k"]
    name = function if isinstance(function, str) else None
    report_id = _report_id(args, kwargs)

    def malformed(message: str) -> MalformedJob:
        return MalformedJob(message, function=name, report_id=report_id)

    if name is None:
        raise malformed(f"the job's function name must be a string, not {_type_name(function)}")
    if name not in functions:
        runs = ", ".join(sorted(functions))
        raise malformed(f"this worker has no job named {name[:SHOWN_NAME_CHARS]!r}; it runs {runs}")
    if not isinstance(args, list):
        raise malformed(f"the job's positional arguments must be a list, not {_type_name(args)}")
    if not isinstance(kwargs, dict):
        raise malformed(f"the job's keyword arguments must be an object, not {_type_name(kwargs)}")
    tries = data["t"]
    if tries is not None and not (_is_int(tries) and 0 <= tries <= MAX_TRIES_FIELD):
        raise malformed("the job's try count must be a whole number from 0 to 2**31-1, or null")
    enqueued = data["et"]
    if not (_is_number(enqueued) and 0 <= enqueued <= MAX_ENQUEUE_MS):
        raise malformed("the job's enqueue time must be milliseconds since 1970, before the year 10000")
    return JobPayload(function=name, args=args, kwargs=kwargs)


def _report_id(args: object, kwargs: object) -> str | None:
    """The job's report id when one can be read, for the result of a job refused for another reason."""
    from worker.runtime.envelope import parse_report_id

    candidate = kwargs.get("report_id") if isinstance(kwargs, dict) else None
    if candidate is None and isinstance(args, list) and args:
        candidate = args[0]
    try:
        return parse_report_id(candidate)
    except MissingReportId:
        return None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return _is_int(value)


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__
