"""A model's tool arguments checked for their JSON types before anything is enqueued.

The job reads its arguments again and refuses what it cannot use (ranges, enums, URLs), but a
wrong type is known from the call alone: refused here, it costs no queue entry and no worker's
time, and the answer is the same ``invalid_request`` the job would give. The types come from the
tools' own input schemas (``jobs.facts``, which imports no tool body), so the check and the
listing never disagree.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from worker.errors import InvalidRequest

JSON_TYPES: Mapping[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
    "number": (int, float),
}
ARTICLE = {"string": "a string", "integer": "an integer", "boolean": "true or false", "number": "a number"}


@functools.cache
def declared_types() -> dict[str, dict[str, str]]:
    """``{tool: {argument: JSON type}}`` from the tools' input schemas (every optional argument
    listed, whatever the deployment turns on: its type does not depend on it)."""
    from jobs.facts import tool_definitions
    from worker.config import RenderMode, Settings

    return {
        definition["name"]: {
            name: spec["type"]
            for name, spec in definition["input_schema"]["properties"].items()
            if isinstance(spec.get("type"), str)
        }
        for definition in tool_definitions(Settings(render=RenderMode.ON))
    }


def check_types(tool: str, arguments: Mapping[str, Any]) -> None:
    """``InvalidRequest`` naming the first argument whose JSON type is not the schema's."""
    for name, json_type in declared_types().get(tool, {}).items():
        if name not in arguments or json_type not in JSON_TYPES:
            continue
        value = arguments[name]
        # JSON has no separate boolean-as-integer: true is not an integer, 1 is not a boolean.
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
    return {str: "a string", int: "an integer", float: "a number", list: "an array", dict: "an object"}.get(
        type(value), type(value).__name__
    )
