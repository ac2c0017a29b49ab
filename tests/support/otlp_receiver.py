"""A real OTLP/HTTP trace receiver on loopback: it decodes what an exporter sends (protobuf, as the
OTLP specification defines it, gzip or not) into plain span records a test can read."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, object]
    resource: dict[str, object]
    status_code: int


SCALARS = {"string_value", "bool_value", "int_value", "double_value"}


def _value(value: AnyValue) -> object:
    which = value.WhichOneof("value")
    return getattr(value, which) if which in SCALARS else None


@dataclass
class OtlpReceiver:
    url: str
    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def wait_for(self, name: str, timeout_s: float = 60.0) -> ReceivedSpan:
        """The first span called ``name``, waiting for exports until ``timeout_s`` (generous: the
        exporter sends from a thread of its own on its own schedule)."""
        async with asyncio.timeout(timeout_s):
            while True:
                for span in self.spans:
                    if span.name == name:
                        return span
                self.arrived.clear()
                await self.arrived.wait()

    def children_of(self, parent: ReceivedSpan) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.parent_span_id == parent.span_id and s.trace_id == parent.trace_id]


@asynccontextmanager
async def otlp_receiver() -> AsyncIterator[OtlpReceiver]:
    receiver = OtlpReceiver(url="")

    async def traces(request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        receiver.requests += 1
        for resource_spans in message.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    receiver.spans.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            resource=resource,
                            status_code=span.status.code,
                        )
                    )
        receiver.arrived.set()
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(), content_type="application/x-protobuf"
        )

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    receiver.url = f"http://127.0.0.1:{port}"
    try:
        yield receiver
    finally:
        await runner.cleanup()
