"""Retry-After is a server's text: any value is a bounded wait or no hint, never an exception."""

from __future__ import annotations

import datetime as dt
import math

from hypothesis import given
from hypothesis import strategies as st

from worker.net.retry_after import MAX_RETRY_AFTER_S, retry_after_s

NOW = dt.datetime(2026, 12, 2, 8, 0, 0, tzinfo=dt.UTC)
DATE_LIKE = st.builds(
    "{}, {:02d} {} {} {:02d}:{:02d}:{:02d} {}".format,
    st.sampled_from(["Mon", "Wed", "Xyz", ""]),
    st.integers(-5, 99),
    st.sampled_from(["Jan", "Dec", "Foo"]),
    st.integers(-(10**6), 10**12),
    st.integers(0, 99),
    st.integers(0, 99),
    st.integers(0, 99),
    st.sampled_from(["GMT", "+0000", "-9999", "UTC", ""]),
)


@given(st.text(max_size=120) | DATE_LIKE | st.integers(-(10**40), 10**40).map(str) | st.floats().map(str))
def test_any_retry_after_is_a_bounded_wait_or_no_hint(value: str) -> None:
    seconds = retry_after_s(value, NOW)
    assert seconds is None or (math.isfinite(seconds) and 0.0 <= seconds <= MAX_RETRY_AFTER_S)
