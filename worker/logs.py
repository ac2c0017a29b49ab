"""One JSON object per log line, so a log pipeline can index job outcomes without parsing prose."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

# Fields a record may carry in ``extra={"fields": {...}}``; anything else stays out of the line.
FIELDS_ATTR = "fields"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, FIELDS_ATTR, None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def configure(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # arq logs every job's arguments and start/stop at INFO; our own per-job line replaces that.
    logging.getLogger("arq").setLevel(max(logging.WARNING, logging.getLevelName(level)))


def fields(**values: Any) -> dict[str, Any]:
    return {FIELDS_ATTR: values}
