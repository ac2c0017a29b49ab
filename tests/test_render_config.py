"""The render settings: off by default, read from the environment, a bad value named at start-up."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs.render.page import reserves
from worker.config import ConfigError, RenderMode, Settings


def test_rendering_is_off_by_default_with_five_renders_a_report() -> None:
    settings = Settings.from_env({})
    assert settings.render is RenderMode.OFF
    assert settings.render_budget == 5
    assert settings.chromium == "chromium"
    assert settings.render_queue == "research:queue:render"


@pytest.mark.parametrize(("raw", "mode"), [("off", "off"), ("ON", "on"), (" auto ", "auto"), ("", "off")])
def test_research_render_takes_off_on_and_auto(raw: str, mode: str) -> None:
    assert Settings.from_env({"RESEARCH_RENDER": raw}).render.value == mode


@given(st.text(min_size=1, max_size=20).filter(lambda s: s.strip().lower() not in {"off", "on", "auto", ""}))
def test_any_other_render_mode_is_a_configuration_error_naming_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError, match=r"^RESEARCH_RENDER: "):
        Settings.from_env({"RESEARCH_RENDER": raw})


@pytest.mark.parametrize(
    ("variable", "bad"),
    [
        ("RESEARCH_RENDER_BUDGET", "0"),
        ("RESEARCH_RENDER_BUDGET", "many"),
        ("RESEARCH_RENDER_MAX_REQUESTS", "-1"),
        ("RESEARCH_RENDER_MAX_BYTES", "0"),
        ("RESEARCH_RENDER_MEMORY_MB", "32"),
        ("RESEARCH_RENDER_QUIET_S", "0"),
        ("RESEARCH_RENDER_QUIET_S", "-0.2"),
        ("RESEARCH_RENDER_QUIET_S", "1.5"),
        ("RESEARCH_RENDER_QUIET_S", "soon"),
    ],
)
def test_render_bounds_must_be_positive_and_within_their_range(variable: str, bad: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{variable}: "):
        Settings.from_env({variable: bad})


def test_the_quiet_window_before_a_render_is_read_is_200_ms_unless_set() -> None:
    assert Settings.from_env({}).render_quiet_s == 0.2
    assert Settings.from_env({"RESEARCH_RENDER_QUIET_S": "0.5"}).render_quiet_s == 0.5


def test_the_render_queue_follows_the_queue() -> None:
    assert Settings.from_env({"RESEARCH_QUEUE": "q1"}).render_queue == "q1:render"


@pytest.mark.parametrize(
    ("seconds", "read_s", "close_s"),
    [(1.0, 1.5, 0.5), (10.0, 1.5, 0.8), (20.0, 1.6, 1.6), (50.0, 4.0, 4.0), (600.0, 5.0, 5.0)],
)
def test_a_render_keeps_back_a_share_of_its_time_for_the_read_and_the_close(
    seconds: float, read_s: float, close_s: float
) -> None:
    # 8 % of the time for each, at least 1.5 s to read and 0.5 s to close, at most 5 s each.
    assert reserves(seconds) == pytest.approx((read_s, close_s))
