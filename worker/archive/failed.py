"""A fetch that ended in an error is evidence too: a 404 or a 503 says the page was gone, or the
site down, on that day. Whatever exchange the guardian completed (a response head arrived) is
archived, whatever its status, and the error result stays what it was."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from worker.errors import ResearchError, Timeout

if TYPE_CHECKING:
    from worker.archive.capture import Capture
    from worker.archive.writer import Archive


@contextlib.contextmanager
def keep_failed(archive: Archive, report_id: str, job_id: str, capture: Capture | None) -> Iterator[None]:
    """On an error, queue what ``capture`` saw (the job does not wait for it: its answer is the error)."""
    try:
        yield
    except ResearchError as error:
        if capture is not None and capture.hops:
            capture.failed("time" if isinstance(error, Timeout) else "length")
            archive.fetched(report_id, capture, job_id)
        raise
