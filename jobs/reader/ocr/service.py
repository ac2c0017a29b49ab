"""OCR as the fetch tool uses it: the report's budget, the scans kept to read on, built once per worker.

The tool makes one ``OcrService`` at start-up and asks it three things: what OCR a fetch may do
(``ask``), to keep a scan whose OCR stopped short (``keep_scan``), and to read on in one when a
continuation needs more (``read_on``). Everything else stays in ``jobs/reader/ocr``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from jobs.reader.ocr.ask import OcrAsk, for_report
from jobs.reader.ocr.models import OcrUnavailable, tessdata_dir
from jobs.reader.ocr.read_on import ReadOn, read_on, wants_more
from worker.logs import fields
from worker.state.budget import OcrBudget
from worker.state.pages.scans import Scans

log = logging.getLogger("research.ocr")

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from jobs.reader.document import Document
    from worker.config import Settings
    from worker.runtime.context import JobContext
    from worker.state.pages.documents import Kept, KeptDocuments


class OcrService:
    def __init__(self, redis: Redis, documents_redis: Redis, settings: Settings) -> None:
        self.enabled = settings.ocr
        self.languages = settings.ocr_languages
        self.budget = OcrBudget(redis, limit=settings.ocr_budget_pages, window_s=settings.budget_window_s)
        # Beside the kept documents (the cache's Redis, when it has its own), for the same window.
        self.scans = Scans(documents_redis, ttl_s=settings.budget_window_s)
        if self.enabled:
            try:
                tessdata_dir(self.languages)
            except OcrUnavailable as missing:
                # Said once at start: each scan would otherwise read as "OCR off" with no reason.
                log.warning(
                    "OCR is on but Tesseract's models are missing: scans and images will be refused",
                    extra=fields(languages=self.languages, error=str(missing)),
                )

    def ask(self, job: JobContext) -> OcrAsk | None:
        """The OCR a fetch for the job's report may do; None with OCR off."""
        return for_report(self.budget, job.report_id, enabled=self.enabled, languages=self.languages)

    async def keep_scan(self, digest: str, document: Document, body: bytes) -> None:
        """Keep a scan whose OCR stopped short beside its kept document, for continuations."""
        if document.ocr is not None and "unread_from" in document.ocr:
            await self.scans.keep(digest, body, list(document.readable.pages or ()))

    async def read_on(
        self,
        job: JobContext,
        documents: KeptDocuments,
        kept: Kept,
        *,
        fmt: str,
        offset: int,
        max_chars: int,
        find: bool,
        extract: str,
        until: float,
    ) -> ReadOn | None:
        """The kept scan read on, when this continuation reaches past what OCR has read of it."""
        ocr = self.ask(job)
        if ocr is None or not wants_more(kept, fmt, offset=offset, max_chars=max_chars, find=find):
            return None
        return await read_on(
            kept,
            self.scans,
            documents,
            ocr,
            until=until,
            cpu_budget_s=job.settings.reduce_cpu_budget_s,
            noted_for=(job.report_id, extract, kept.page.url),
        )
