"""``ResearchError.with_message``: an error re-worded keeps its kind and every field it carries."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker import errors
from worker.guardian.reasons import Reason

EXAMPLES: list[errors.ResearchError] = [
    errors.HttpStatus("503 from the host", status=503, retry_after_s=30.0),
    errors.HttpStatus("404", status=404),
    errors.DestinationBlocked("a private address", reason=next(iter(Reason))),
    errors.SchemeNotAllowed("ftp", reason=next(iter(Reason))),
    errors.RateLimited("slow down", status=429),
    errors.UpstreamError("the provider failed"),
    errors.Timeout("too slow"),
    errors.InternalError("a bug"),
]


@pytest.mark.parametrize("error", EXAMPLES, ids=lambda e: type(e).__name__)
@given(message=st.text(max_size=300))
def test_a_reworded_error_keeps_its_kind_status_and_fields(error: errors.ResearchError, message: str) -> None:
    twin = error.with_message(message)
    assert type(twin) is type(error) and twin.kind is error.kind
    assert twin.message == message and str(twin) == message
    assert {k: v for k, v in vars(twin).items() if k != "message"} == {
        k: v for k, v in vars(error).items() if k != "message"
    }
    assert error.message != message or twin is not error  # the original is left as it was
