"""Logs for people and for machines: one readable line per event on a terminal, JSON elsewhere."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.processes import settings_env
from tests.support.run_cli import run_cli
from worker import logs
from worker.config import Settings
from worker.config.values import LogFormat
from worker.logs import fields


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root, research = logging.getLogger(), logging.getLogger("research")
    saved = (root.handlers[:], root.level, research.handlers[:], research.level, research.propagate)
    yield
    root.handlers[:], research.handlers[:] = saved[0], saved[2]
    root.setLevel(saved[1])
    research.setLevel(saved[3])
    research.propagate = saved[4]


def emit(stream: io.StringIO, log_format: LogFormat | None = None, **values: object) -> str:
    logs.configure("INFO", log_format, stream=stream)
    logging.getLogger("research.test").info("job finished", extra=fields(**values))
    return stream.getvalue()


def test_a_terminal_gets_one_readable_line_per_event(restore_logging: None) -> None:
    out = emit(Terminal(), outcome="ok", duration_ms=12.5, tools=["fetch_page", "web_search"])
    assert out.count("\n") == 1
    line = out.rstrip("\n")
    assert "INFO" in line and "job finished" in line
    assert line.endswith("outcome=ok duration_ms=12.5 tools=fetch_page,web_search")
    assert not line.startswith("{")


def test_anything_else_gets_one_json_object_per_event(restore_logging: None) -> None:
    out = emit(io.StringIO(), outcome="ok", duration_ms=12.5)
    record = json.loads(out)
    assert (record["msg"], record["level"], record["outcome"], record["duration_ms"]) == (
        "job finished",
        "info",
        "ok",
        12.5,
    )


@pytest.mark.parametrize(
    ("stream", "chosen", "json_expected"),
    [(Terminal, LogFormat.JSON, True), (io.StringIO, LogFormat.TEXT, False)],
    ids=["json forced on a terminal", "text forced off a terminal"],
)
def test_the_log_format_setting_overrides_the_guess(
    stream: type[io.StringIO], chosen: LogFormat, json_expected: bool, restore_logging: None
) -> None:
    out = emit(stream(), chosen, outcome="ok")
    assert out.startswith("{") is json_expected


def test_the_variable_reaches_the_setting() -> None:
    assert Settings.from_env({"RESEARCH_LOG_FORMAT": "text"}).log_format is LogFormat.TEXT
    assert Settings.from_env({"RESEARCH_LOG_FORMAT": "json"}).log_format is LogFormat.JSON
    assert Settings.from_env({}).log_format is None


@given(st.dictionaries(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), st.text(max_size=40), max_size=4))
def test_a_text_line_stays_one_line_whatever_the_field_values(values: dict[str, str]) -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        out = emit(Terminal(), **values)
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    assert out.count("\n") == 1


def test_a_value_with_spaces_is_quoted_so_the_next_field_stays_apart(restore_logging: None) -> None:
    out = emit(Terminal(), reason="connection refused", host="a.test")
    assert out.rstrip("\n").endswith('reason="connection refused" host=a.test')


def test_an_exception_follows_its_line_indented(restore_logging: None) -> None:
    stream = Terminal()
    logs.configure("INFO", stream=stream)
    try:
        raise RuntimeError("a bug")
    except RuntimeError:
        logging.getLogger("research.test").exception("job failed")
    first, *rest = stream.getvalue().rstrip("\n").splitlines()
    assert "job failed" in first
    assert rest and all(line.startswith("    ") for line in rest)
    assert rest[-1].strip() == "RuntimeError: a bug"


def test_one_logger_can_be_configured_without_touching_the_root(restore_logging: None) -> None:
    stream = io.StringIO()
    root_handlers = logging.getLogger().handlers[:]
    logs.configure("INFO", LogFormat.JSON, stream=stream, logger_name="research")
    logging.getLogger("research.worker").info("worker started")
    assert logging.getLogger().handlers == root_handlers
    assert json.loads(stream.getvalue())["msg"] == "worker started"


@pytest.mark.parametrize(("variable", "json_lines"), [(None, True), ("text", False), ("json", True)])
def test_the_command_line_logs_json_off_a_terminal_unless_told_otherwise(
    variable: str | None, json_lines: bool, settings: Settings
) -> None:
    env = settings_env(settings)
    if variable is not None:
        env["RESEARCH_LOG_FORMAT"] = variable
    proc = run_cli("run", "--burst", env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 0
    assert any("worker stopped" in line for line in lines)
    assert all(line.startswith("{") is json_lines for line in lines)
