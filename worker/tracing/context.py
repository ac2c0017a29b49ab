"""The W3C ``traceparent`` a job carries: read from the caller's OpenTelemetry context, checked on
arrival.

A job's trace context is its caller's, never something a model chose: the client takes it from the
orchestrator's current span (or an explicit ``trace_parent=``), a plain arq client passes it among
the job's keyword arguments, MCP in ``_meta.traceparent``. A value that is not a valid version-00
traceparent is ignored (W3C Trace Context, section 3.2.2.1: restart the trace) rather than refused:
tracing must never cost a job its result.
"""

from __future__ import annotations

import sys

# The job keyword argument that carries it (not one of any tool's own arguments).
TRACEPARENT = "traceparent"

_HEX = frozenset("0123456789abcdef")
_LENGTH = 55  # "00-" + 32 + "-" + 16 + "-" + 2


def parse_traceparent(value: object) -> str | None:
    """``value`` when it is a valid traceparent, else None.

    Version 00 exactly as the specification writes it: lowercase hex, a trace id and a parent id
    that are not all zeros. A later version is read by its first 55 characters, as the
    specification asks, when what follows starts with a dash.
    """
    if not isinstance(value, str) or len(value) < _LENGTH or len(value) > 512:
        return None
    version = value[:2]
    if version == "ff" or not set(version) <= _HEX:
        return None
    if version == "00" and len(value) != _LENGTH:
        return None
    if len(value) > _LENGTH and value[_LENGTH] != "-":
        return None
    head = value[:_LENGTH]
    if head[2] != "-" or head[35] != "-" or head[52] != "-":
        return None
    trace_id, parent_id, flags = head[3:35], head[36:52], head[53:55]
    if not (set(trace_id) <= _HEX and set(parent_id) <= _HEX and set(flags) <= _HEX):
        return None
    if trace_id == "0" * 32 or parent_id == "0" * 16:
        return None
    return f"00-{trace_id}-{parent_id}-{flags}"


def current_traceparent() -> str | None:
    """The traceparent of the caller's current OpenTelemetry span, if it has a valid one.

    A process that never imported OpenTelemetry has no current span, so this imports nothing
    there: the client costs an orchestrator without tracing nothing.
    """
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return parse_traceparent(carrier.get(TRACEPARENT))
