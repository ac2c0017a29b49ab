"""A fetch's network phases, heard from the connection itself: TCP connect, TLS, first byte.

The guarded session hands every new connection a socket from its factory (``connect`` starts
there), drives TLS through an ``SSLObject`` whose handshake calls mark its start and end, and
tells an aiohttp trace when the request's headers went out and the response's came back (the
first byte). A reused connection has no connect or TLS phase, which is the truth of it. Each hook
writes to the phase log of the task that opened the connection (``worker.tracing.phases``);
outside a job they do nothing.
"""

from __future__ import annotations

import ssl
from types import SimpleNamespace
from typing import Any

import aiohttp

from worker.tracing import phases

_CONNECT = "connect"
_TLS = "tls"
_HEADERS_SENT = "headers sent"


def connecting() -> None:
    """The socket factory's call: a new connection's TCP connect starts now."""
    phases.mark(_CONNECT)


class TimedSSLObject(ssl.SSLObject):
    """Marks the TLS handshake's start (its first step, as TCP is connected) and its end."""

    _handshaking = False

    def do_handshake(self) -> None:
        if not self._handshaking:
            self._handshaking = True
            phases.record_since(phases.CONNECT, _CONNECT)
            phases.mark(_TLS)
        super().do_handshake()  # raises SSLWantReadError until the handshake is done
        phases.record_since(phases.TLS, _TLS)


def timed(context: ssl.SSLContext) -> ssl.SSLContext:
    """``context`` with handshakes that report their phases (``SSLContext.sslobject_class``)."""
    context.sslobject_class = TimedSSLObject
    return context


async def _headers_sent(session: aiohttp.ClientSession, ctx: SimpleNamespace, params: Any) -> None:
    phases.mark(_HEADERS_SENT)


async def _response_headers(session: aiohttp.ClientSession, ctx: SimpleNamespace, params: Any) -> None:
    phases.record_since(phases.FIRST_BYTE, _HEADERS_SENT)


def first_byte_trace() -> aiohttp.TraceConfig:
    """An aiohttp trace that measures from the request's headers sent to the response's headers."""
    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(_headers_sent)
    trace.on_request_end.append(_response_headers)
    return trace
