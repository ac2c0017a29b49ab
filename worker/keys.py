"""Every Redis key the project writes, each built by one function.

arq's own keys (``arq:job:``, ``arq:in-progress:``, ``arq:result:``, ``arq:retry:``) are arq's; the
ones here are ours. Report ids, job ids and org ids are validated before they reach a key, so a key
can never be steered into another report's namespace.
"""

from __future__ import annotations

PREFIX = "research:"


def result(job_id: str) -> str:
    """The contract's result object for one job (orjson, expires with the result TTL)."""
    return f"{PREFIX}result:{job_id}"


def done(job_id: str) -> str:
    """A one-element list pushed with the result, so a waiting client wakes on a blocking pop."""
    return f"{PREFIX}done:{job_id}"


def budget(report_id: str) -> str:
    """A hash per report: a counter per tool plus one field per charged job id."""
    return f"{PREFIX}budget:{report_id}"


def menu(report_id: str) -> str:
    """The set of canonical URLs this report may fetch (the URL menu)."""
    return f"{PREFIX}menu:{report_id}"


def wake(queue_name: str) -> str:
    """Tokens pushed after each enqueue; an idle worker blocks on this list instead of polling."""
    return f"{PREFIX}wake:{queue_name}"


def health(queue_name: str, worker_id: str) -> str:
    """One health key per worker replica, so one replica stopping never hides another."""
    return f"{queue_name}:health-check:{worker_id}"


def health_pattern(queue_name: str) -> str:
    return f"{queue_name}:health-check:*"


def recent(queue_name: str) -> str:
    """A capped list of recent outcomes for the dashboard (no page text)."""
    return f"{PREFIX}recent:{queue_name}"


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
