"""Content-Encoding as browsers read it, decoded in bounded steps.

aiohttp decodes only a single, exactly named coding: ``gzip, gzip`` and ``x-gzip`` came back as
compressed bytes, and bytes after the end of a gzip stream failed the whole page. Here every coding
in the header is undone, last applied first: gzip (``x-gzip`` is its old name; concatenated members
are read on, anything else after the stream is ignored, as browsers do), deflate (zlib-wrapped as
the standard says, or raw as some servers send it), and ``identity``. Decoding is pulled a bounded
amount at a time, so a bomb costs at most what the caller asks for, at every layer.
"""

from __future__ import annotations

import zlib
from typing import Protocol

from worker.errors import UnsupportedContentType

# Codings named in a refusal; any other is "an unknown coding": the header is the server's text.
KNOWN_CODINGS = frozenset(
    {"br", "zstd", "compress", "x-compress", "exi", "pack200-gzip", "aes128gcm", "dcb", "dcz"}
)
_GZIP_MAGIC = b"\x1f\x8b"
# Input handed to a decompressor at once: small, so one call's work stays a few milliseconds.
_STEP = 16_384


class ByteSource(Protocol):
    def read(self, limit: int) -> bytes:
        """Up to ``limit`` bytes; b"" when nothing is available right now."""
        ...


class Buffer:
    """The raw body as it arrives from the network: the innermost source of the pipeline."""

    def __init__(self) -> None:
        self._data = bytearray()

    def feed(self, chunk: bytes) -> None:
        self._data += chunk

    def read(self, limit: int) -> bytes:
        taken = bytes(self._data[:limit])
        del self._data[:limit]
        return taken


class _Inflate:
    """One gzip or deflate layer over a source, giving at most ``limit`` bytes per read."""

    def __init__(self, source: ByteSource, coding: str) -> None:
        self._source = source
        self._coding = coding
        self._inflater: zlib._Decompress | None = None
        self._pending = b""
        self._done = False

    def read(self, limit: int) -> bytes:
        while not self._done:
            if not self._pending:
                self._pending = self._source.read(_STEP)
                if not self._pending:
                    # Output the inflater holds back from input it already took (a long match cut
                    # by the last limit) comes out with no new input.
                    return self._inflater.decompress(b"", limit) if self._inflater is not None else b""
            if self._inflater is None:
                if self._coding == "deflate" and len(self._pending) < 2:
                    # Which deflate it is shows in the first two bytes: wait for the second.
                    more = self._source.read(_STEP)
                    self._pending += more
                    if not more:
                        return b""
                    continue
                self._inflater = zlib.decompressobj(self._wbits(self._pending))
            out = self._inflater.decompress(self._pending, limit)
            self._pending = self._inflater.unconsumed_tail
            if self._inflater.eof:
                self._next_member(self._inflater.unused_data)
            if out:
                return out
        return b""

    def _wbits(self, head: bytes) -> int:
        if self._coding == "gzip":
            return 16 + zlib.MAX_WBITS
        # "deflate" is zlib-wrapped by the standard, but servers also send raw deflate: browsers
        # accept both, telling them apart by the zlib header's checksum.
        if len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
            return zlib.MAX_WBITS
        return -zlib.MAX_WBITS

    def _next_member(self, rest: bytes) -> None:
        self._inflater = None
        if self._coding == "gzip" and rest.startswith(_GZIP_MAGIC):
            self._pending = rest  # a concatenated gzip member: read on
        else:
            self._pending = b""
            self._done = True  # whatever follows the stream is ignored


def codings(header: str | None) -> list[str]:
    """The codings in a Content-Encoding header, in the order they were applied."""
    if not header:
        return []
    found: list[str] = []
    for part in header.lower().split(","):
        name = part.strip()
        if not name or name == "identity":
            continue
        if name == "x-gzip":
            name = "gzip"
        if name not in ("gzip", "deflate"):
            shown = name if name in KNOWN_CODINGS else "an unknown coding"
            raise UnsupportedContentType(
                f"the body is encoded with {shown}, which the worker does not decode"
            )
        found.append(name)
    return found


class Decoder:
    """Raw body chunks in, decoded bytes out, never more at once than asked for."""

    def __init__(self, content_encoding: str | None) -> None:
        self.raw = Buffer()
        source: ByteSource = self.raw
        for coding in reversed(codings(content_encoding)):  # the last applied is undone first
            source = _Inflate(source, coding)
        self._out = source

    def feed(self, chunk: bytes) -> None:
        self.raw.feed(chunk)

    def read(self, limit: int) -> bytes:
        """Up to ``limit`` decoded bytes from what was fed so far; b"" when it needs more input.

        Raises ``zlib.error`` when the body is not what its Content-Encoding says.
        """
        return self._out.read(limit) if limit > 0 else b""
