"""PDF bodies to text. Not read yet: a PDF is refused as before, until the PDF reader lands here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from worker.errors import UnsupportedContentType

if TYPE_CHECKING:
    from jobs.reader.document import Document


async def read_pdf(body: bytes, url: str, *, max_chars: int) -> Document:
    raise UnsupportedContentType("the body is a PDF, which this worker does not read")
