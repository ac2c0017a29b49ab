"""One request in the child: the body read as what the worker says it is (a PDF, an image, an
office document), with the OCR the request may do, into a reply or a refusal."""

from __future__ import annotations

from jobs.reader.ocr.engine import Engine
from jobs.reader.ocr.image import extract_image
from jobs.reader.ocr.run import OcrRun
from jobs.reader.office.archive import OfficeRefused
from jobs.reader.office.read import read_office
from jobs.reader.pdf.text import extract
from jobs.reader.pdf.wire import Kind, PdfRefused, Reading, Refusal, Request

OFFICE_REFUSALS = {"zip_bomb": Refusal.ZIP_BOMB, "xml_entities": Refusal.XML_ENTITIES}


def read_request_body(request: Request, engine: Engine | None) -> Reading | Refusal:
    options = request.options
    # A child with an engine has OCR on: even with no pages left to spend, a scan's first page is
    # noted as unread, so the result can say the budget stopped it.
    ocr = OcrRun(engine, options.ocr_pages, options.ocr_budget_s) if engine is not None else None
    try:
        if options.kind is Kind.IMAGE:
            if engine is None:
                return Refusal.OCR_OFF
            return extract_image(
                request.body, max_chars=request.max_chars, ocr=ocr, from_page=options.from_page
            )
        if options.kind is Kind.OFFICE:
            return _office(request)
        return extract(
            request.body,
            max_chars=request.max_chars,
            cpu_budget_s=request.cpu_budget_s,
            ocr=ocr,
            from_page=options.from_page,
        )
    except PdfRefused as refused:
        return refused.refusal


def _office(request: Request) -> Reading | Refusal:
    try:
        markdown, plain, hazards, cut = read_office(request.body, request.max_chars)
    except OfficeRefused as refused:
        return OFFICE_REFUSALS.get(refused.hazard, Refusal.OFFICE_DAMAGED)
    reading = Reading(pages=1, pages_read=1, title="", texts=[plain], uris=[[]], markdown=markdown)
    reading.hazards = hazards
    reading.complete = not cut
    reading.characters = len(plain)
    return reading
