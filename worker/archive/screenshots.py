"""A rendered page's screenshot read back from the store, for the dashboard's job page.

Only a record id that parses names a file, and only a ``resource`` record of type ``image/png``
whose bytes begin with PNG's signature is returned: the dashboard serves it as an image, never
anything a server chose as its type.
"""

from __future__ import annotations

import io

from warcio.archiveiterator import ArchiveIterator

from worker.archive.ids import file_key, parse_record_id
from worker.archive.store import Store, StoreFailed

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_FILE_BYTES = 4 * 1024 * 1024  # a screenshot is at most 2 MB (jobs/render/screenshot.py)


async def screenshot_png(store: Store, record: str) -> bytes | None:
    """The PNG the record holds; None when it is gone, not a screenshot, or too large."""
    if parse_record_id(record) is None:
        return None
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in store.stream(file_key(record)):
            size += len(chunk)
            if size > MAX_FILE_BYTES:
                return None
            chunks.append(chunk)
    except StoreFailed:
        return None
    for entry in ArchiveIterator(io.BytesIO(b"".join(chunks))):
        if entry.rec_type != "resource":
            continue
        if entry.rec_headers.get_header("WARC-Record-ID") != f"<{record}>":
            continue
        if entry.rec_headers.get_header("Content-Type") != "image/png":
            return None
        png = entry.content_stream().read()
        return png if png.startswith(PNG_SIGNATURE) else None
    return None
