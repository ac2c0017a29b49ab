"""A model's call whose arguments have the wrong JSON type is refused before anything is enqueued.

The oracle is the tools' own input schemas as JSON Schema (jsonschema's type check), and the
queue in Redis, which stays empty; no worker runs, so a call that reached the enqueue would fail
differently (no worker running)."""

from __future__ import annotations

from typing import Any

import jsonschema
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from jobs.definitions import tool_definitions
from worker.client import ResearchClient
from worker.config import RenderMode, Settings
from worker.tool_calls import check_call

SCHEMAS = {d["name"]: d["input_schema"] for d in tool_definitions(Settings(render=RenderMode.ON))}
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
CALLS = st.sampled_from(sorted(SCHEMAS)).flatmap(
    lambda tool: st.tuples(st.just(tool), st.sampled_from(sorted(SCHEMAS[tool]["properties"])), VALUES)
)


# JSON Schema counts 5.0 as an integer; the jobs never did (an integral float is refused there
# too, jobs/fetch.py and jobs/search.py), so the oracle's integer is JSON's whole numbers only.
STRICT = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda checker, value: isinstance(value, int) and not isinstance(value, bool)
    ),
)


def wrong_type(tool: str, name: str, value: Any) -> bool:
    """jsonschema's verdict on the value's type alone (ranges, enums and lengths left out)."""
    declared = SCHEMAS[tool]["properties"][name]["type"]
    return not STRICT({"type": declared}).is_valid(value)


@hypothesis_settings(max_examples=300, deadline=None)
@given(call=CALLS)
def test_a_value_is_refused_before_the_enqueue_exactly_when_its_json_type_is_wrong(
    call: tuple[str, str, Any],
) -> None:
    tool, name, value = call
    refusal = check_call(tool, {name: value})
    assert (refusal is not None) is wrong_type(tool, name, value), (tool, name, value)
    if refusal is not None:
        assert name in refusal.message


@hypothesis_settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(call=CALLS.filter(lambda c: wrong_type(*c)))
async def test_a_wrongly_typed_call_is_an_invalid_request_result_and_nothing_is_enqueued(
    settings: Settings, redis: aioredis.Redis, token: str, report: str, call: tuple[str, str, Any]
) -> None:
    tool, name, value = call
    arguments = {"url": "https://example.org/"} if tool == "fetch_page" else {"query": "q"}
    arguments[name] = value
    async with ResearchClient(settings=settings, job_id_prefix=f"{token}-") as client:
        result = await client.call_result(tool, arguments, report_id=report)
    assert result["ok"] is False and result["error"]["kind"] == "invalid_request", result
    assert await redis.zcard(settings.queue_name) == 0
