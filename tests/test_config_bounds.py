"""Every numeric setting is bounded both ways at start-up, and its edges are walked one by one.

The table comes from the settings themselves (``worker.config.numeric_settings``), so a setting
added later is walked as well: none reaches Redis (a TTL, a counter, a job timeout) unbounded.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.config import ClientSettings, ConfigError, NumberBounds, Settings, numeric_settings

NUMBERS = numeric_settings()
NAMES = sorted(NUMBERS)


def read(name: str, raw: str) -> None:
    """Read ``raw`` as ``name`` the way a worker or a client does (whichever reads it)."""
    Settings.from_env({name: raw})
    ClientSettings.from_env({name: raw})


def refused(name: str, raw: str) -> str:
    with pytest.raises(ConfigError) as caught:
        read(name, raw)
    message = str(caught.value)
    assert message.startswith(f"{name}: "), message
    assert "\n" not in message and len(message) < 300, message
    return message


def accepted(name: str, raw: str) -> None:
    try:
        read(name, raw)
    except ConfigError as exc:
        if not str(exc).startswith(f"{name}: "):
            return  # another reader's rule (a client does not read every worker setting)
        raise


def test_every_numeric_setting_has_an_upper_bound_redis_can_hold() -> None:
    # Redis refuses a TTL whose milliseconds overflow a signed 64-bit integer; a counter's limit
    # must fit one too. Every bound sits far below both.
    assert len(NUMBERS) >= 15
    for bounds in NUMBERS.values():
        assert math.isfinite(bounds.maximum) and bounds.maximum * 1000 < 2**53, bounds


@pytest.mark.parametrize("name", NAMES)
def test_the_edges_of_each_setting(name: str) -> None:
    b = NUMBERS[name]
    top = int(b.maximum) if b.integer else b.maximum
    accepted(name, str(top))
    assert "most this setting takes" in refused(name, str(top + 1))
    assert "most this setting takes" in refused(name, "1" + "0" * 17)  # 1e17 as digits
    if b.minimum_allowed:
        accepted(name, str(int(b.minimum)))
    else:
        refused(name, "0")
    refused(name, str(int(b.minimum) - 1))
    for hostile in ("1e17", "nan", "NaN", "inf", "-inf", "+inf", "ten", "0x10", "1 0", "--1", "_"):
        if not b.integer and hostile == "1e17":
            assert "most this setting takes" in refused(name, hostile)
            continue
        refused(name, hostile)


@pytest.mark.parametrize("name", NAMES)
def test_whitespace_around_a_value_is_ignored_and_underscores_group_digits(name: str) -> None:
    b = NUMBERS[name]
    value = int(b.minimum) + 1
    accepted(name, f"  {value}\t")
    # Underscores group the digits of any value in bounds: "1_0" where 10 is allowed, else the
    # value itself grouped ("1_025" for a minimum of 1,024).
    accepted(name, "1_0" if b.minimum <= 10 <= b.maximum else f"{value:_}" if value >= 1000 else str(value))
    if not b.integer:
        # A fraction in bounds: 1.5, or halfway for a setting whose bounds are narrower.
        accepted(name, "1.5" if b.minimum <= 1.5 <= b.maximum else str((b.minimum + b.maximum) / 2))


@pytest.mark.parametrize("name", [n for n in NAMES if not NUMBERS[n].integer])
def test_negative_zero_is_zero_for_seconds(name: str) -> None:
    if NUMBERS[name].minimum_allowed:
        accepted(name, "-0.0")
    else:
        refused(name, "-0.0")
        refused(name, "-0")


def _check(bounds: NumberBounds, raw: str, value: float) -> None:
    low_ok = value >= bounds.minimum if bounds.minimum_allowed else value > bounds.minimum
    if low_ok and value <= bounds.maximum:
        accepted(bounds.name, raw)
    else:
        refused(bounds.name, raw)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(NAMES), value=st.integers(min_value=-(10**20), max_value=10**20))
def test_any_integer_is_accepted_exactly_within_the_bounds(name: str, value: int) -> None:
    _check(NUMBERS[name], str(value), value)


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from([n for n in NAMES if not NUMBERS[n].integer]),
    value=st.floats(allow_nan=True, allow_infinity=True),
)
def test_any_float_is_accepted_exactly_within_the_bounds_of_seconds(name: str, value: float) -> None:
    bounds = NUMBERS[name]
    if math.isnan(value):
        refused(name, repr(value))
        return
    _check(bounds, repr(value), value)


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(NAMES), raw=st.text(max_size=30))
def test_any_text_is_a_value_or_a_one_line_error_never_a_crash(name: str, raw: str) -> None:
    message = ""
    try:
        read(name, raw)
    except ConfigError as exc:
        message = str(exc)
    assert not message or (message.startswith(f"{name}: ") and "\n" not in message)


@pytest.mark.parametrize(
    ("variable", "value"),
    [("RESEARCH_RESULT_TTL_S", "100000000000000000"), ("RESEARCH_BUDGET_WINDOW_S", "1e17")],
)
def test_the_worker_refuses_to_start_with_a_setting_past_its_bound(variable: str, value: str) -> None:
    env = {**os.environ, variable: value}
    proc = subprocess.run(
        [sys.executable, "-m", "worker.cli", "run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"research-worker: configuration error: {variable}: ")
