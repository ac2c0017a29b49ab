"""What a model's tool call may carry: its tools, the arguments only the orchestrator sets, and the
arguments read as the JSON object a job can carry (for the client, the MCP server and the CLI)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import orjson

from worker.errors import InvalidRequest
from worker.limits import CITE, FETCH_PAGE, WEB_SEARCH
from worker.tracing.context import TRACEPARENT

# The tools a model may call, and the arguments only the orchestrator may set: a tool call that
# names a report or an organization is trying to spend someone else's budget.
MODEL_TOOLS: Final = (FETCH_PAGE, WEB_SEARCH, CITE)
ORCHESTRATOR_ARGUMENTS: Final = frozenset({"report_id", "org_id", TRACEPARENT})
# Far above any valid call (a URL is at most 8,192 characters): arguments past it are refused
# before they are enqueued, so a model (or an MCP peer) cannot park megabytes in Redis.
MAX_ARGUMENTS_BYTES: Final = 65_536


def model_arguments(arguments: object) -> dict[str, Any]:
    """A model's tool arguments as a JSON object a job can carry, or ``InvalidRequest``.

    A dict is read as the JSON text it stands for, so a dict and its JSON text give the same job:
    an integer beyond 64 bits becomes a number the job then refuses, never a serialization error.
    """
    if isinstance(arguments, Mapping):
        try:
            text: str | bytes = json.dumps(arguments, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            raise InvalidRequest("the tool arguments must be a JSON object of strings and numbers") from None
    elif isinstance(arguments, str | bytes):
        text = arguments
    else:
        raise InvalidRequest("the tool arguments must be a JSON object")
    if len(text) > MAX_ARGUMENTS_BYTES:
        raise InvalidRequest(
            f"the tool arguments are larger than any valid call ({MAX_ARGUMENTS_BYTES:,} bytes)"
        )
    if not text.strip():
        return {}  # some frameworks send "" for a call without arguments
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise InvalidRequest(
            "the tool arguments are not JSON a job can carry (malformed, or a number too large)"
        ) from None
    if not isinstance(parsed, dict):
        raise InvalidRequest("the tool arguments must be a JSON object")
    return parsed
