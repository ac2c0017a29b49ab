"""Tracing: the orchestrator's W3C trace context carried through a job, and its phases measured.

``context`` reads and writes ``traceparent``; ``phases`` measures what a job spends its time on
(always, for the dashboard's job page); ``export`` sends the job and its phases to an OTLP
collector as spans when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set. With no endpoint nothing of the
OpenTelemetry SDK is imported.
"""
