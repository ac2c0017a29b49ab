"""Reading a page's metadata the way a fetch does: through build_document."""

from __future__ import annotations

from jobs.reader.document import Document, build_document
from worker.page_metadata import PageMetadata

URL = "https://news.example.test/world/rates"


async def read(
    html: str | bytes, url: str = URL, *, content_language: str | None = None, extract: str = "main"
) -> Document:
    body = html.encode() if isinstance(html, str) else html
    return await build_document(
        body,
        "text/html; charset=utf-8",
        url,
        extract=extract,
        max_chars=40_000,
        cpu_budget_s=2.0,
        body_truncated=False,
        content_language=content_language,
    )


async def metadata_of(
    html: str | bytes, url: str = URL, *, content_language: str | None = None
) -> PageMetadata:
    document = await read(html, url, content_language=content_language)
    assert document.metadata is not None
    return document.metadata


def page(head: str = "", body: str = "<p>Some text of the page.</p>", *, lang: str | None = None) -> str:
    html_attrs = f' lang="{lang}"' if lang else ""
    return f"<!doctype html><html{html_attrs}><head>{head}</head><body>{body}</body></html>"
