"""The documents a page embeds as its content: a PDF in an iframe, embed or object, or named by a
PDF viewer's ``file=`` (pdf.js's ``viewer.html?file=...``), as canonical https URLs.

A page whose content is a PDF viewer says a few words of its own; the document is the PDF. Each URL
is resolved as a link is (``jobs.reader.links``: the page's ``<base href>``, the guardian's
parser), a viewer's ``file=`` against the viewer's own URL (where pdf.js resolves it). What a link
may not be (``javascript:``, ``data:``, ``blob:``, http, an address the URL rules refuse) is no
document either; an IP literal the guardian's policy refuses is dropped by the fetch, which knows
the policy. At most ``MAX_DOCUMENTS``, distinct, in page order.
"""

from __future__ import annotations

from collections.abc import Sequence

import yarl

from jobs.reader.links import LinkResolver
from worker.guardian.urls import canonical_url

MAX_DOCUMENTS = 20
PDF_TYPES = ("application/pdf", "application/x-pdf")


def embedded_documents(embeds: Sequence[tuple[str, str]], base_href: str | None, page_url: str) -> list[str]:
    """The canonical URLs of the PDFs among ``embeds`` (raw URL, declared type), in page order."""
    resolver = LinkResolver(base_href, page_url)
    found: list[str] = []
    for raw, declared in embeds:
        if len(found) >= MAX_DOCUMENTS:
            break
        url = _one(resolver, raw)
        if url is None:
            continue
        document = _viewed(url) or (url if _is_pdf(url, declared) else None)
        if document is not None and document not in found:
            found.append(document)
    return found


def _one(resolver: LinkResolver, raw: str) -> str | None:
    """``raw`` resolved against the page, as a link would be; None when it is no fetchable link."""
    before = len(resolver.links)
    resolver.add([raw])
    if len(resolver.links) > before:
        return resolver.links[-1]
    return resolver.canonical.get(raw)


def _viewed(viewer: str) -> str | None:
    """The document a viewer's ``file=`` names, resolved against the viewer; None without one."""
    try:
        url = yarl.URL(viewer, encoded=True)
        named = url.query.get("file")
        if named is None and "file=" in url.fragment:
            named = yarl.URL("?" + url.fragment).query.get("file")  # pdf.js also reads the hash
        if not named:
            return None
        return canonical_url(str(url.join(yarl.URL(named.strip()))))
    except (ValueError, TypeError, IndexError, UnicodeError, OverflowError):
        return None


def _is_pdf(url: str, declared: str) -> bool:
    if declared.split(";")[0].strip().lower() in PDF_TYPES:
        return True
    try:
        return yarl.URL(url, encoded=True).path.lower().endswith(".pdf")
    except (ValueError, TypeError):
        return False
