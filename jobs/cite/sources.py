"""The texts a report read for a URL: its kept documents, or, once those are gone, its archived
records reduced again by the reader, in each format and extract mode the pieces could have had.

Offsets are in the whole text exactly as the report's pieces gave it (``offset``, ``next_offset``,
``page_offsets`` of a fetch result in that format). Nothing here opens a connection: the kept
documents are in Redis, the archive in its store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.cite.archived import ArchivedBody, ArchivedReport
from jobs.fetch.page import in_both_formats
from jobs.reader.document import build_document
from jobs.reader.formats import MARKDOWN, TEXT
from worker.errors import UnsupportedContentType
from worker.limits import EXTRACT_MODES, MAX_DOCUMENT_CHARS
from worker.state.pages.documents import Gone, Kept, KeptDocuments

if TYPE_CHECKING:
    pass

# The plain text first: a quote a reader copied is most likely exactly there (Markdown escapes).
FORMATS = (TEXT, MARKDOWN)
KEPT = "kept"
ARCHIVE = "archive"


@dataclass(frozen=True)
class Source:
    """One whole text of a fetched document, and the evidence that names it."""

    text: str
    format: str
    extract: str
    page_offsets: tuple[int, ...] | None
    sha256: str | None
    archive_record: str | None
    fetched_at: str | None
    origin: str  # KEPT or ARCHIVE


class Texts:
    """A URL's texts, read as they are needed: the kept ones at once, an archived record's
    reductions one extract mode at a time (a quote verified in the first is not read again)."""

    def __init__(self, made: list[Source], steps: list[Callable[[], Awaitable[list[Source]]]]) -> None:
        self.made = made
        self._steps = steps

    async def more(self) -> bool:
        """Read the next reduction into ``made``; False when there is none left."""
        if not self._steps:
            return False
        self.made.extend(await self._steps.pop(0)())
        return True

    def then(self, step: Callable[[], Awaitable[list[Source]]]) -> None:
        self._steps.append(step)

    def stop(self) -> None:
        self._steps.clear()


class Unavailable:
    """The report read the URL, but its text is no longer kept and no archived record holds it."""


UNAVAILABLE = Unavailable()


class ReportTexts:
    """One report's texts, for one job: each read at most once."""

    def __init__(
        self,
        documents: KeptDocuments,
        archived: ArchivedReport | None,
        report_id: str,
        *,
        cpu_budget_s: float,
        until: float,
    ) -> None:
        self._documents = documents
        self._archived = archived
        self._report = report_id
        self._cpu_budget_s = cpu_budget_s
        self._until = until
        self._texts: dict[str, Texts | Unavailable | None] = {}

    async def texts(self, url: str) -> Texts | Unavailable | None:
        """The texts the report read for ``url`` (canonical); UNAVAILABLE; None: never fetched."""
        if url not in self._texts:
            self._texts[url] = await self._read(url)
        return self._texts[url]

    async def _read(self, url: str) -> Texts | Unavailable | None:
        found: list[Source] = []
        gone = False
        for extract in EXTRACT_MODES:
            kept = await self._documents.lookup(self._report, extract, url)
            if isinstance(kept, Gone):
                gone = True
            elif isinstance(kept, Kept):
                texts = await self._kept(kept, extract)
                gone = gone or texts is None
                found.extend(texts or [])
        if found:
            return Texts(found, [])
        body = await self._archived.body(url) if self._archived is not None else None
        if body is not None:
            lazy = Texts([], [])
            for extract in EXTRACT_MODES:
                lazy.then(self._reduction(body, extract, lazy))
            return lazy
        return UNAVAILABLE if gone else None

    async def _kept(self, kept: Kept, extract: str) -> list[Source] | None:
        sources = []
        for name in FORMATS:
            layout = kept.layouts.get(name)
            if layout is None:
                continue
            text = await self._documents.text(kept, name, 0, layout.total_chars)
            if text is None:
                return None  # shed or expired since its record was read
            sources.append(
                Source(
                    text=text,
                    format=name,
                    extract=extract,
                    page_offsets=layout.page_offsets,
                    sha256=kept.page.sha256,
                    archive_record=kept.page.archive_record,
                    fetched_at=kept.page.fetched_at,
                    origin=KEPT,
                )
            )
        return sources

    def _reduction(
        self, body: ArchivedBody, extract: str, texts: Texts
    ) -> Callable[[], Awaitable[list[Source]]]:
        """The archived body read again as the fetch read it, in ``extract`` mode, both formats."""

        async def read() -> list[Source]:
            try:
                document = await build_document(
                    body.body,
                    body.content_type,
                    body.url,
                    extract=extract,
                    max_chars=MAX_DOCUMENT_CHARS,
                    cpu_budget_s=self._cpu_budget_s,
                    body_truncated=body.truncated,
                    until=self._until,
                    format=TEXT,
                    content_language=body.content_language,
                )
            except UnsupportedContentType:
                texts.stop()
                return []
            if document.pages is not None:
                texts.stop()  # a PDF has no extract modes: one reading is all of it
            # As a fetch keeps them: the text it read, and the other format from the same reading.
            whole = await in_both_formats(document, self._cpu_budget_s)
            return [
                Source(
                    text=whole.texts[name],
                    format=name,
                    extract=extract,
                    page_offsets=whole.offsets[name],
                    sha256=body.sha256,
                    archive_record=body.record,
                    fetched_at=body.fetched_at,
                    origin=ARCHIVE,
                )
                for name in FORMATS
            ]

        return read
