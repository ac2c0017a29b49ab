"""aiohttp's response parsing, as lenient as browsers in one place: bytes after a closing response.

A server that answers with a Content-Length and ``Connection: close`` and then sends more bytes
than it declared (a CMS appending a debug footer, a proxy padding the record) gets its page shown
by every browser: the declared length is the body and the rest is dropped with the connection.
aiohttp's parser instead fails the whole response ("Data after Connection: close"), losing a page
a person can read. Here such a response is cut at its declared end before aiohttp parses it.

Only that case is touched: one well-formed Content-Length, no Transfer-Encoding, and a connection
that the response closes (``Connection: close``, or HTTP/1.0 without keep-alive). Everything else,
and anything unusual in the head, is left to aiohttp's parser, whose strictness is the point.

This hooks two aiohttp internals (the connector's protocol factory and the protocol's parser);
tests/test_fetch_hostile_responses.py fails loudly if an aiohttp release changes them.
"""

from __future__ import annotations

import functools
import re
from typing import Any, cast

from aiohttp import TCPConnector
from aiohttp.client_proto import ResponseHandler

_HEAD_END = re.compile(rb"\r?\n\r?\n")
_STATUS = re.compile(rb"HTTP/1\.([01]) +([0-9]{3})")
# Heads longer than this are left to aiohttp, which bounds them itself.
_MAX_HEAD = 65_536
_NOTHING: tuple[tuple[()], bool, bytes] = ((), False, b"")


def declared_end(head: bytes) -> int | None:
    """The body's length when the response declares it unambiguously and closes the connection."""
    lines = head.split(b"\n")
    status = _STATUS.match(lines[0].strip())
    if status is None:
        return None
    code = int(status.group(2))
    if code < 200:
        return None  # an interim response: another head follows
    closes = status.group(1) == b"0"
    lengths: list[bytes] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon:
            return None
        field = name.strip().lower()
        if field == b"content-length":
            lengths.append(value.strip())
        elif field == b"transfer-encoding":
            return None
        elif field == b"connection":
            tokens = {token.strip().lower() for token in value.split(b",")}
            closes = b"close" in tokens or (closes and b"keep-alive" not in tokens)
    if not closes or len(lengths) != 1 or not lengths[0].isdigit() or len(lengths[0]) > 15:
        return None
    return 0 if code in (204, 304) else int(lengths[0])


class _CutAtDeclaredEnd:
    """Wraps aiohttp's parser: passes bytes through until the closing response's declared end."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._head = bytearray()
        self._allowed: int | None = None  # bytes of head and body this response may have
        self._undecided = True
        self._fed = 0

    def feed_data(self, data: bytes) -> Any:
        if self._undecided and data:
            self._decide(data)
        if self._allowed is not None and data:
            room = self._allowed - self._fed
            if room <= 0:
                return _NOTHING
            data = data[:room]
        self._fed += len(data)
        return self._inner.feed_data(data)

    def _decide(self, data: bytes) -> None:
        self._head += data[: _MAX_HEAD - len(self._head)]
        end = _HEAD_END.search(self._head)
        if end is not None:
            self._undecided = False
            body = declared_end(bytes(self._head[: end.start()]))
            if body is not None:
                self._allowed = end.end() + body
        elif len(self._head) >= _MAX_HEAD:
            self._undecided = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _BrowserResponseHandler(ResponseHandler):
    def _drain_tail(self) -> None:
        # Called by set_response_params right after it builds the parser, before any byte is fed.
        parser = getattr(self, "_parser", None)
        if parser is not None and not isinstance(parser, _CutAtDeclaredEnd):
            self._parser = cast(Any, _CutAtDeclaredEnd(parser))
        super()._drain_tail()


class BrowserTCPConnector(TCPConnector):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._factory = cast(
            "functools.partial[ResponseHandler]", functools.partial(_BrowserResponseHandler, loop=self._loop)
        )
