"""A PDF's metadata from what the child read (metadata.xmp): the information dictionary first,
as most producers write it and readers show it, then XMP for what the dictionary lacks."""

from __future__ import annotations

import re

from jobs.reader.metadata.dates import PDF_FLOOR
from jobs.reader.metadata.record import Builder
from worker.page_metadata import PageMetadata

# What word processors write as a title when the author wrote none: a file name, "Untitled".
_NOT_A_TITLE = re.compile(
    r"(?:^(?:untitled|microsoft word - .*|document\d*|slide \d+)$)"
    r"|\.(?:docx?|pdf|tex|dvi|indd|qxd|rtf|odt|pptx?|xlsx?|ps)$",
    re.IGNORECASE,
)


def pdf_metadata(declared: dict[str, list[str]]) -> tuple[PageMetadata, int]:
    """The PDF's metadata and the invisible characters removed from it."""

    def first(key: str) -> str | None:
        values = declared.get(key)
        return values[0] if values else None

    built = Builder(date_floor=PDF_FLOOR)
    for key, source in (("info:Title", "pdf-info"), ("xmp:dc:title", "xmp")):
        title = first(key)
        if title is not None and not _NOT_A_TITLE.search(title.strip()):
            built.text("headline", title, source)
    built.authors(declared.get("info:Author", []), "pdf-info", split=True)
    built.authors(declared.get("xmp:dc:creator", []), "xmp")
    built.date("published", first("info:CreationDate"), "pdf-info")
    for key in ("xmp:xmp:CreateDate", "xmp:prism:publicationDate", "xmp:dc:date"):
        built.date("published", first(key), "xmp")
    built.date("modified", first("info:ModDate"), "pdf-info")
    built.date("modified", first("xmp:xmp:ModifyDate"), "xmp")
    built.text("description", first("info:Subject"), "pdf-info")
    built.text("description", first("xmp:dc:description"), "xmp")
    built.language(first("xmp:dc:language"), "xmp")
    for key in ("xmp:prism:doi", "xmp:pdfx:doi", "xmp:dc:identifier"):
        built.doi(first(key), "xmp")
    return built.metadata, built.hidden_removed
