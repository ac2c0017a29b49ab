"""``research-worker archive REPORT``: one gzipped WARC file with every record a report cites.

The file is a ``warcinfo`` record, then each cited record's file as stored, in the order the
report cited them: the bytes are copied, never decoded and encoded again (each stored file is a
series of gzip members, and a series of gzip members is one ``.warc.gz``). A file holding a
``revisit`` needs its original, so the original's file comes first when the report did not cite it
itself; finding it reads the WARC headers of the files being copied, nothing else.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable

from warcio.archiveiterator import ArchiveIterator

from worker.archive.ids import file_key, parse_record_id
from worker.archive.records import warcinfo
from worker.archive.store import Store, StoreFailed

# A stored file larger than this is copied without looking for revisits in it (a fetch holds at
# most the PDF cap plus its hops' heads; a revisit file is a few kilobytes).
SCAN_LIMIT = 1 << 20


class Missing(Exception):
    """A cited record's file is not in the store (deleted by retention, or never written)."""


async def export(
    store: Store, report_id: str, cited: list[str], *, missing: Callable[[str], None] | None = None
) -> AsyncIterator[bytes]:
    """The export's bytes, a chunk at a time. ``missing`` hears of each record whose file is gone;
    without it, a missing file raises ``Missing``."""
    yield warcinfo(f"{report_id}.warc.gz", {"isPartOf": report_id, "format": "WARC File Format 1.1"})
    written: set[str] = set()
    for record in cited:
        async for chunk in _with_originals(store, record, written, missing):
            yield chunk


async def _with_originals(
    store: Store, record: str, written: set[str], missing: Callable[[str], None] | None
) -> AsyncIterator[bytes]:
    if record in written:
        return
    written.add(record)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in store.stream(file_key(record)):
            chunks.append(chunk)
            size += len(chunk)
    except StoreFailed as failed:
        if missing is None:
            raise Missing(record) from failed
        missing(record)
        return
    data = b"".join(chunks)
    if size <= SCAN_LIMIT:
        for original in refers_to(data):
            async for chunk in _with_originals(store, original, written, missing):
                yield chunk
    yield data


def refers_to(data: bytes) -> list[str]:
    """The records a file's revisits refer to (their originals)."""
    found = []
    for record in ArchiveIterator(io.BytesIO(data)):
        if record.rec_type == "revisit":
            refers = parse_record_id(str(record.rec_headers.get_header("WARC-Refers-To") or "").strip("<>"))
            if refers is not None:
                found.append(refers)
    return found
