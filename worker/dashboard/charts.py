"""The charts of the last hour as geometry: bars, lines and ticks in SVG user units.

The template draws them as inline SVG: no script, no external asset, and every label and tooltip
goes through the template's escaping like any other value. One minute is one slot on the x axis,
the current minute last.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from worker.dashboard.formatting import duration_ms
from worker.dashboard.history import OTHER, History, Minute
from worker.errors import ErrorKind
from worker.state.result_records import OK

WIDE = (1280, 190)  # the jobs chart, across the page
NARROW = (640, 170)  # the two line charts, side by side
LEFT = 52
RIGHT = 10
TOP = 10
BOTTOM = 22
BAR_FILL = 0.8  # of a minute's slot; the rest is the gap between bars
TICK_EVERY_MINUTES = 10

# One colour per outcome, fixed so a kind keeps its colour from one refresh to the next.
COLORS = {
    OK: "#2f8f5b",
    ErrorKind.INVALID_REQUEST: "#8c564b",
    ErrorKind.MISSING_REPORT_ID: "#c49c94",
    ErrorKind.BUDGET_EXHAUSTED: "#9467bd",
    ErrorKind.SCHEME_NOT_ALLOWED: "#e377c2",
    ErrorKind.URL_NOT_IN_MENU: "#f0a6ca",
    ErrorKind.DESTINATION_BLOCKED: "#d62728",
    ErrorKind.DNS_FAILURE: "#ff9896",
    ErrorKind.TOO_MANY_REDIRECTS: "#bcbd22",
    ErrorKind.UNSUPPORTED_CONTENT_TYPE: "#a5a53a",
    ErrorKind.HTTP_STATUS: "#ff7f0e",
    ErrorKind.TIMEOUT: "#e0a458",
    ErrorKind.CONNECTION_FAILED: "#1f77b4",
    ErrorKind.UPSTREAM_ERROR: "#7fa7d4",
    ErrorKind.RATE_LIMITED: "#17becf",
    ErrorKind.INTERNAL_ERROR: "#3b3b3b",
}
UNKNOWN_COLOR = "#8a8a8a"


@dataclass(frozen=True)
class Tick:
    at: float  # y for the value axis, x for the time axis
    label: str


@dataclass(frozen=True)
class Axes:
    width: int
    height: int
    left: int
    top: int
    plot_width: int
    plot_height: int
    y_ticks: list[Tick]
    x_ticks: list[Tick]

    @property
    def bottom(self) -> int:
        return self.top + self.plot_height

    @property
    def right(self) -> int:
        return self.left + self.plot_width


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    title: str


@dataclass(frozen=True)
class Series:
    name: str
    color: str
    total: int
    bars: list[Bar]


@dataclass(frozen=True)
class StackedBars:
    key: str
    title: str
    axes: Axes
    series: list[Series]


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    title: str


@dataclass(frozen=True)
class LineChart:
    key: str
    title: str
    axes: Axes
    paths: list[str]  # SVG path data, one per run of minutes that have a value
    dots: list[Dot]
    latest: str


def color(outcome: str) -> str:
    return COLORS.get(outcome, UNKNOWN_COLOR)


def jobs_per_minute(history: History) -> StackedBars:
    """Jobs finished per minute, one series per outcome, "ok" at the bottom of each stack."""
    totals = [sum(minute.jobs.values()) for minute in history.minutes]
    top = nice_ceiling(max(totals, default=0))
    axes = _axes(history.minutes, top, _count, WIDE)
    slots = len(history.minutes)
    scale = axes.plot_height / top
    stacked = [0.0] * len(history.minutes)
    series = []
    for outcome in history.outcomes:
        bars = []
        for index, minute in enumerate(history.minutes):
            count = minute.jobs.get(outcome, 0)
            if count <= 0:
                continue
            height = count * scale
            stacked[index] += height
            bars.append(
                Bar(
                    x=_slot_x(axes, index, slots),
                    y=axes.bottom - stacked[index],
                    width=_slot_width(axes, slots) * BAR_FILL,
                    height=height,
                    title=f"{clock(minute.start)} · {outcome}: {count}",
                )
            )
        total = sum(minute.jobs.get(outcome, 0) for minute in history.minutes)
        series.append(Series(outcome, UNKNOWN_COLOR if outcome == OTHER else color(outcome), total, bars))
    return StackedBars("chart-jobs", "Jobs per minute, by outcome", axes, series)


def queue_depth(history: History) -> LineChart:
    values = [float(minute.depth) if minute.depth is not None else None for minute in history.minutes]
    return _line(
        "chart-depth", "Queue depth (deepest seen as jobs finished)", history.minutes, values, _count
    )


def queue_wait(history: History) -> LineChart:
    values = [minute.wait_p95_ms for minute in history.minutes]
    return _line("chart-wait", "p95 queue wait", history.minutes, values, _wait)


def _wait(ms: float) -> str:
    return "0" if ms == 0 else duration_ms(ms)


def _count(value: float) -> str:
    return f"{value:g}"


def _line(
    key: str,
    title: str,
    minutes: Sequence[Minute],
    values: Sequence[float | None],
    label: Callable[[float], str],
) -> LineChart:
    top = nice_ceiling(max((value for value in values if value is not None), default=0.0))
    axes = _axes(minutes, top, label, NARROW)
    scale = axes.plot_height / top
    paths: list[str] = []
    dots: list[Dot] = []
    run: list[str] = []
    for index, (minute, value) in enumerate(zip(minutes, values, strict=True)):
        if value is None:
            if run:
                paths.append(" ".join(run))
            run = []
            continue
        x = _slot_middle(axes, index, len(minutes))
        y = axes.bottom - value * scale
        run.append(f"{'M' if not run else 'L'}{x:.1f},{y:.1f}")
        dots.append(Dot(x, y, f"{clock(minute.start)} · {label(value)}"))
    if run:
        paths.append(" ".join(run))
    latest = next((label(value) for value in reversed(values) if value is not None), "no data")
    return LineChart(key, title, axes, paths, dots, latest)


def _axes(
    minutes: Sequence[Minute], top: float, label: Callable[[float], str], size: tuple[int, int]
) -> Axes:
    width, height = size
    plot_height = height - TOP - BOTTOM
    y_ticks = [
        Tick(TOP + plot_height - plot_height * fraction, label(top * fraction))
        for fraction in (0.0, 0.5, 1.0)
    ]
    axes = Axes(width, height, LEFT, TOP, width - LEFT - RIGHT, plot_height, y_ticks, [])
    x_ticks = [
        Tick(_slot_middle(axes, index, len(minutes)), clock(minute.start))
        for index, minute in enumerate(minutes)
        if int(minute.start // 60) % TICK_EVERY_MINUTES == 0
    ]
    return dataclasses.replace(axes, x_ticks=x_ticks)


def _slot_width(axes: Axes, slots: int) -> float:
    return axes.plot_width / max(1, slots)


def _slot_x(axes: Axes, index: int, slots: int) -> float:
    return axes.left + index * _slot_width(axes, slots) + _slot_width(axes, slots) * (1 - BAR_FILL) / 2


def _slot_middle(axes: Axes, index: int, slots: int) -> float:
    return _slot_x(axes, index, slots) + _slot_width(axes, slots) * BAR_FILL / 2


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5 or 5 times a power of ten that is at least ``value`` (1 for none)."""
    if not value > 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if step * power >= value * (1 - 1e-12):
            return step * power
    return 10.0 * power


def clock(at: float) -> str:
    return time.strftime("%H:%M", time.gmtime(at))
