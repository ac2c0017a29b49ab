"""What each page is given: the shared snapshot, narrowed by the filters, and the charts drawn.

The same selection feeds ``/`` and ``/api/state``, so the page and the JSON never disagree.
"""

from __future__ import annotations

import dataclasses

import worker.dashboard.charts as charts
from worker.dashboard.data import MAX_ROWS, Snapshot
from worker.dashboard.filters import Filters, outcome_counts, paginate
from worker.runtime import fingerprint
from worker.state import activity

REFRESH_S = 5


def index_context(snap: Snapshot, filters: Filters) -> dict[str, object]:
    history = snap.history
    return {
        "generated_at": snap.generated_at,
        "refresh_s": REFRESH_S,
        "error": snap.error,
        "queue": snap.queue,
        "workers": snap.workers,
        "workers_alive": sum(not worker.stale for worker in snap.workers),
        "settings_differ": settings_differ(snap),
        "history": history,
        "charts": (
            {
                "jobs": charts.jobs_per_minute(history),
                "depth": charts.queue_depth(history),
                "wait": charts.queue_wait(history),
            }
            if history is not None
            else None
        ),
        "backoffs": snap.backoffs,
        "archive": snap.archive,
        "archive_lost": snap.archive_lost,
        "filters": filters,
        "page": paginate(snap.recent, filters),
        "outcome_counts": outcome_counts(snap.recent, filters),
        "in_progress": [row for row in snap.in_progress if filters.matches(row)],
        "waiting": [row for row in snap.waiting if filters.matches(row)],
        "budgets": [row for row in snap.budgets if filters.report in (None, row.report_id)],
        "spend": snap.spend,
        "org_caps": snap.org_caps,
        "partial": snap.partial,
        "max_rows": MAX_ROWS,
        "recent_limit": activity.RECENT_LIMIT,
    }


def state_document(snap: Snapshot, filters: Filters) -> dict[str, object]:
    """The snapshot as JSON: the same rows ``/`` shows for these filters, and the page they are on."""
    document = snap.as_dict()
    page = paginate(snap.recent, filters)
    document["recent"] = [dataclasses.asdict(row) for row in page.rows]
    document["page"] = {
        "number": page.number,
        "pages": page.pages,
        "size": page.size,
        "matching": page.matching,
    }
    document["filters"] = {"outcome": filters.outcome, "tool": filters.tool, "report": filters.report}
    document["settings_differ"] = settings_differ(snap)
    document["outcomes"] = outcome_counts(snap.recent, filters)
    document["in_progress"] = [dataclasses.asdict(row) for row in snap.in_progress if filters.matches(row)]
    document["waiting"] = [dataclasses.asdict(row) for row in snap.waiting if filters.matches(row)]
    document["budgets"] = [
        dataclasses.asdict(row) for row in snap.budgets if filters.report in (None, row.report_id)
    ]
    return document


def settings_differ(snap: Snapshot) -> list[str]:
    """The settings that change results on which the queue's live workers disagree (names only)."""
    published = [worker.settings for worker in snap.workers if not worker.stale and worker.settings_digest]
    return fingerprint.disagreements(published)
