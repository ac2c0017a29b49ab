"""What a model's tool call may carry: its tools, the arguments only the orchestrator sets, and the
arguments read as the JSON object a job can carry (for the client, the MCP server and the CLI).

A call is also checked for its arguments' JSON types before anything is enqueued: the job reads
them again and refuses what it cannot use (ranges, enums, URLs), but a wrong type is known from
the call alone, so it costs no queue entry and no worker's time, and the answer is the same
``invalid_request`` the job would give. The types come from the tools' own input schemas
(``jobs.facts``, which imports no tool body), so the check and the listing never disagree.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any, Final

import orjson

from worker.errors import InvalidRequest
from worker.limits import CITE, FETCH_PAGE, WEB_SEARCH
from worker.serialization import JobArguments
from worker.tracing.context import TRACEPARENT

# The tools a model may call, and the arguments only the orchestrator may set: a tool call that
# names a report or an organization is trying to spend someone else's budget.
MODEL_TOOLS: Final = (FETCH_PAGE, WEB_SEARCH, CITE)
ORCHESTRATOR_ARGUMENTS: Final = frozenset({"report_id", "org_id", TRACEPARENT})
# Far above any valid call (a URL is at most 8,192 characters): arguments past it are refused
# before they are enqueued, so a model (or an MCP peer) cannot park megabytes in Redis.
MAX_ARGUMENTS_BYTES: Final = 65_536


def model_arguments(arguments: object) -> JobArguments:
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


MAX_INT = 2**63 - 1
JSON_TYPES: Mapping[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
    "number": (int, float),
}
ARTICLE = {"string": "a string", "integer": "an integer", "boolean": "true or false", "number": "a number"}


def check_call(name: str, arguments: object) -> InvalidRequest | None:
    """Why a model's call to ``name`` is refused before anything is enqueued, or None."""
    try:
        given = model_arguments(arguments)
    except InvalidRequest as refusal:
        return refusal
    if ORCHESTRATOR_ARGUMENTS & given.keys():
        named = (
            "traceparent is"
            if given.keys() & ORCHESTRATOR_ARGUMENTS == {TRACEPARENT}
            else "report_id and org_id are"
        )
        return InvalidRequest(f"{named} set by the orchestrator, never by a tool call")
    try:
        check_types(name, given)
    except InvalidRequest as refusal:
        return refusal
    return None


@functools.cache
def declared_types() -> dict[str, dict[str, str]]:
    """``{tool: {argument: JSON type}}`` from the tools' input schemas (every optional argument
    listed, whatever the deployment turns on: its type does not depend on it)."""
    from jobs.facts import tool_definitions
    from worker.config import RenderMode, Settings

    found: dict[str, dict[str, str]] = {}
    for definition in tool_definitions(Settings(render=RenderMode.ON)):
        schema = definition.get("input_schema")
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(properties, dict):
            continue
        found[str(definition["name"])] = {
            name: kind
            for name, spec in properties.items()
            if isinstance(spec, dict) and isinstance(kind := spec.get("type"), str)
        }
    return found


def check_types(tool: str, arguments: Mapping[str, Any]) -> None:
    """``InvalidRequest`` naming the first argument whose JSON type is not the schema's."""
    for name, json_type in declared_types().get(tool, {}).items():
        if name not in arguments or json_type not in JSON_TYPES:
            continue
        value = arguments[name]
        if (
            json_type == "integer"
            and isinstance(value, float)
            and value.is_integer()
            and abs(value) > MAX_INT
        ):
            # Digits past 64 bits are read as a float: the caller wrote an integer, out of range.
            raise InvalidRequest(f"{tool}: {name} is out of range and was refused; give a small integer")
        # JSON has no boolean-as-integer: true is not an integer, 1 is not a boolean.
        wrong = isinstance(value, bool) != (json_type == "boolean") or not isinstance(
            value, JSON_TYPES[json_type]
        )
        if wrong:
            raise InvalidRequest(f"{tool}: {name} must be {ARTICLE[json_type]}, not {json_name(value)}")


def json_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    names = {str: "a string", int: "an integer", float: "a number", list: "an array", dict: "an object"}
    return names.get(type(value), type(value).__name__)
