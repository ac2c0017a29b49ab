"""Jobs as OpenTelemetry spans, sent over OTLP/HTTP when an endpoint is configured.

A job's span is started when the job starts, as a child of the orchestrator's span (the job's
``traceparent``), and dated from the job's enqueue so that its first child, ``queue wait``, lies
inside it; each measured phase becomes a child span with the times it was measured at. The span
carries what helps to find and explain a job and nothing a page or a key could leak into: the tool,
the report and job ids, the host (never the path or query), the status, the bytes read and the
error kind. Export runs on the SDK's batch thread, never on the job's time.

With no endpoint, ``Tracing`` is off: it imports nothing of the SDK and ``start_job`` returns None.
The standard ``OTEL_*`` variables the SDK reads itself (headers, timeout, compression, service name,
resource attributes) apply as usual.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from worker.tracing.context import TRACEPARENT
from worker.tracing.phases import QUEUE_WAIT, PhaseLog

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

log = logging.getLogger("research.tracing")

SERVICE_NAME = "research-worker"
# How long a stopping worker waits for its last spans to leave.
FLUSH_TIMEOUT_MS = 5000

AttributeValue = str | int | float | bool


class JobSpan:
    """One running job's span; ``finish`` adds its phases and ends it."""

    def __init__(self, tracer: Tracer, span: Span, enqueued_ns: int, started_ns: int) -> None:
        self._tracer = tracer
        self._span = span
        self._enqueued_ns = enqueued_ns
        self._started_ns = started_ns

    def traceparent(self) -> str:
        """This job's own context, for a job it hands work to (a render)."""
        context = self._span.get_span_context()
        return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"

    def finish(
        self,
        phases: PhaseLog,
        attributes: Mapping[str, AttributeValue],
        error_kind: str | None,
        end_ns: int,
    ) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        parent = trace.set_span_in_context(self._span)
        if self._started_ns > self._enqueued_ns:
            self._tracer.start_span(QUEUE_WAIT, context=parent, start_time=self._enqueued_ns).end(
                end_time=self._started_ns
            )
        for phase in phases.phases:
            self._tracer.start_span(phase.name, context=parent, start_time=phase.start_ns).end(
                end_time=phase.end_ns
            )
        if phases.dropped:
            self._span.set_attribute("research.phases_dropped", phases.dropped)
        self._span.set_attributes(dict(attributes))
        if error_kind is not None:
            self._span.set_attribute("error.type", error_kind)
            self._span.set_status(Status(StatusCode.ERROR, error_kind))
        self._span.end(end_time=max(end_ns, self._started_ns))


class Tracing:
    """The worker's tracer: off (free) without an endpoint, an OTLP exporter with one."""

    def __init__(
        self,
        endpoint: str | None,
        *,
        service_instance: str = "",
        version: str = "",
        schedule_delay_ms: float | None = None,
    ) -> None:
        self._provider: TracerProvider | None = None
        self._tracer: Tracer | None = None
        if endpoint:
            self._provider, self._tracer = _provider(endpoint, service_instance, version, schedule_delay_ms)

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    def start_job(
        self,
        *,
        tool: str,
        job_id: str,
        traceparent: str | None,
        enqueued_ns: int,
        started_ns: int,
    ) -> JobSpan | None:
        if self._tracer is None:
            return None
        from opentelemetry.trace import SpanKind
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        parent = TraceContextTextMapPropagator().extract({TRACEPARENT: traceparent}) if traceparent else None
        enqueued_ns = min(enqueued_ns, started_ns)  # a client clock ahead of ours: no negative wait
        span = self._tracer.start_span(
            tool,
            context=parent,
            kind=SpanKind.CONSUMER,
            start_time=enqueued_ns,
            attributes={"research.tool": tool, "research.job_id": job_id},
        )
        return JobSpan(self._tracer, span, enqueued_ns, started_ns)

    def flush(self, timeout_ms: int = FLUSH_TIMEOUT_MS) -> bool:
        """Send every ended span now (tests, and a stopping worker); blocking."""
        return self._provider.force_flush(timeout_ms) if self._provider is not None else True

    def close(self) -> None:
        """Flush and stop the exporter; blocking (run it off the event loop)."""
        if self._provider is not None:
            self._provider.force_flush(FLUSH_TIMEOUT_MS)
            self._provider.shutdown()
            self._provider = self._tracer = None


def _provider(
    endpoint: str, service_instance: str, version: str, schedule_delay_ms: float | None
) -> tuple[TracerProvider, Tracer]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # Resource.create also reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, which win.
    attributes: dict[str, str] = {"service.name": SERVICE_NAME}
    if version:
        attributes["service.version"] = version
    if service_instance:
        attributes["service.instance.id"] = service_instance
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint), schedule_delay_millis=schedule_delay_ms)
    )
    log.info("exporting traces over OTLP/HTTP", extra={"endpoint_host": urlsplit(endpoint).hostname})
    return provider, provider.get_tracer("research-worker", version or None)
