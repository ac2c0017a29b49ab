"""Log lines for people and for machines.

On a terminal each event is one readable line (time, level, what happened, then ``key=value``
fields); elsewhere it is one JSON object, so a log pipeline indexes job outcomes without parsing
prose. ``RESEARCH_LOG_FORMAT`` (``text`` or ``json``) overrides the choice.

A job's context (its id, tool, report, url or query) is bound once, by the envelope, with
``bound``: every line logged inside the job, by any module and in any task it starts, carries it,
so a provider's retry warning names the job it delays. A line's own fields come after, and win.
Every line passes ``worker.redact.redact_urls``: no URL password reaches a log.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, TextIO

import orjson

from worker.config.values import LogFormat
from worker.redact import redact_urls

# Fields a record may carry in ``extra={"fields": {...}}``; anything else stays out of the line.
FIELDS_ATTR = "fields"
# The fields bound for the code running now (a job's context), copied onto each record it logs.
CONTEXT_ATTR = "context"
EMPTY: Mapping[str, Any] = MappingProxyType({})
_context: ContextVar[Mapping[str, Any]] = ContextVar("research_log_context", default=EMPTY)


@contextlib.contextmanager
def bound(**values: Any) -> Iterator[None]:
    """Every line logged inside the block (and in the tasks it starts) carries ``values``."""
    token = _context.set(MappingProxyType({**_context.get(), **values}))
    try:
        yield
    finally:
        # Resetting the token also drops what ``bind`` added inside the block.
        _context.reset(token)


def bind(**values: Any) -> None:
    """Add ``values`` to the context bound now (inside ``bound``: until the block ends)."""
    _context.set(MappingProxyType({**_context.get(), **values}))


def context() -> Mapping[str, Any]:
    return _context.get()


class ContextFilter(logging.Filter):
    """Copies the bound context onto the record as it is made, in the task that logs it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, CONTEXT_ATTR):
            setattr(record, CONTEXT_ATTR, _context.get())
        return True


def line_fields(record: logging.LogRecord) -> dict[str, object]:
    """The record's bound context, then its own fields (which win where both name a field)."""
    merged: dict[str, object] = {}
    bound_now = getattr(record, CONTEXT_ATTR, None)
    if isinstance(bound_now, Mapping):
        merged.update(bound_now)
    own = getattr(record, FIELDS_ATTR, None)
    if isinstance(own, dict):
        merged.update(own)
    return {key: redact_urls(value) if isinstance(value, str) else value for key, value in merged.items()}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": redact_urls(record.getMessage()),
        }
        line.update(line_fields(record))
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


class TextFormatter(logging.Formatter):
    """``12:00:01 INFO  worker started  queue=research:queue max_jobs=16`` (a traceback follows, indented)."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created))
        parts = [stamp, f"{record.levelname:<7}", _one_line(redact_urls(record.getMessage()))]
        fields = line_fields(record)
        if fields:
            parts.append(" ".join(f"{key}={_value(value)}" for key, value in fields.items()))
        line = "  ".join(parts)
        if record.exc_info:
            trace = self.formatException(record.exc_info)
            line += "\n" + "\n".join(f"    {row}" for row in trace.splitlines())
        return line


def _value(value: object) -> str:
    """A field value a reader can tell apart from the next field: quoted when it has spaces or quotes."""
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(_value(item) for item in value) or '""'
    text = str(value)
    if text == "" or any(ch.isspace() or ch in "\"'=" or not ch.isprintable() for ch in text):
        return orjson.dumps(text).decode()
    return text


def _one_line(message: str) -> str:
    return message if message.isprintable() else orjson.dumps(message).decode()[1:-1]


def configure(
    level: str,
    log_format: LogFormat | None = None,
    *,
    stream: TextIO | None = None,
    logger_name: str = "",
) -> None:
    """Send ``logger_name``'s records (the root logger by default) to stderr in the chosen format.

    Without a format, text when the stream is a terminal and JSON otherwise.
    """
    out = stream or sys.stderr
    chosen = log_format or (LogFormat.TEXT if out.isatty() else LogFormat.JSON)
    handler = logging.StreamHandler(out)
    handler.setFormatter(TextFormatter() if chosen is LogFormat.TEXT else JsonFormatter())
    handler.addFilter(ContextFilter())
    logger = logging.getLogger(logger_name or None)
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    if logger_name:
        logger.propagate = False
    else:
        # arq logs every job's arguments and start/stop at INFO; our own per-job line replaces that.
        logging.getLogger("arq").setLevel(max(logging.WARNING, logging.getLevelName(level)))


def fields(**values: object) -> dict[str, object]:
    return {FIELDS_ATTR: values}
