"""An HTML page's metadata: the declarations in the documented precedence (docs/metadata.md).

For each field the declarations are offered in order, and the first that gives a clean value
stands: JSON-LD, Highwire Press ``citation_*``, Dublin Core, OpenGraph and ``article:*``, Twitter
cards and other ``<meta>`` names, ``<time datetime>``, then the page's structure (``<html lang>``,
``<link rel=canonical>``, the first ``<h1>``, ``<title>``). Only when the page declares no
publication date or author does the URL's path or the byline under the headline say them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from jobs.reader.cpu_budget import CpuBudget
from jobs.reader.html.reduce import Reduction
from jobs.reader.html.vocabulary import ASIDE, COMMENTS, FOOTER, HEADER, NAV
from jobs.reader.links import LinkResolver
from jobs.reader.metadata import jsonld
from jobs.reader.metadata.dates import date_in_text, iso_date
from jobs.reader.metadata.declarations import Declarations
from jobs.reader.metadata.headline import contains, without_site
from jobs.reader.metadata.record import Builder
from jobs.reader.metadata.values import last_first
from worker.errors import DestinationBlocked, SchemeNotAllowed
from worker.guardian.policy import AddressPolicy
from worker.guardian.urls import parse_https_url
from worker.page_metadata import PageMetadata

PUBLISHED = {
    "highwire": ("citation_publication_date", "citation_date", "citation_online_date", "citation_cover_date"),
    "dublin-core": (
        "dcterms.issued",
        "dc.date.issued",
        "dcterms.date",
        "dc.date",
        "dcterms.created",
        "dc.date.created",
    ),
    "opengraph": (
        "article:published_time",
        "og:article:published_time",
        "article:published",
        "og:published_time",
    ),
    "meta": (
        "datepublished",
        "date",
        "pubdate",
        "publishdate",
        "publish-date",
        "publish_date",
        "publication_date",
        "publication-date",
        "prism.publicationdate",
        "sailthru.date",
        "parsely-pub-date",
        "article.published",
        "article_date_original",
        "originalpublicationdate",
        "datecreated",
        "created",
    ),
}
MODIFIED = {
    "dublin-core": ("dcterms.modified", "dc.date.modified"),
    "opengraph": ("article:modified_time", "og:updated_time", "og:article:modified_time", "article:modified"),
    "meta": ("datemodified", "last-modified", "lastmod", "dateupdated", "modified", "revised"),
}
AUTHORS = {
    "dublin-core": ("dc.creator", "dcterms.creator"),
    "opengraph": ("article:author", "og:article:author", "book:author"),
    "meta": ("author", "parsely-author", "sailthru.author", "byl", "dc.contributor"),
}
HEADLINES = {
    "highwire": ("citation_title",),
    "dublin-core": ("dc.title", "dcterms.title"),
    "opengraph": ("og:title",),
    "meta": ("twitter:title", "headline", "parsely-title", "title"),
}
SITE_NAMES = {
    "highwire": ("citation_journal_title", "citation_conference_title", "citation_publisher"),
    "dublin-core": ("dc.publisher", "dcterms.publisher"),
    "opengraph": ("og:site_name",),
    "meta": ("application-name", "apple-mobile-web-app-title", "publisher"),
}
DESCRIPTIONS = {
    "highwire": ("citation_abstract",),
    "dublin-core": ("dc.description", "dcterms.description", "dcterms.abstract"),
    "opengraph": ("og:description",),
    "meta": ("twitter:description", "description"),
}
LANGUAGES = {
    "highwire": ("citation_language",),
    "dublin-core": ("dc.language", "dcterms.language"),
    "opengraph": ("og:locale",),
    "meta": ("content-language", "language"),
}
DOIS = {
    "highwire": ("citation_doi",),
    "dublin-core": ("dc.identifier", "dcterms.identifier", "dc.identifier.doi"),
    "meta": ("prism.doi", "bepress_citation_doi", "doi"),
}
ORDER = ("highwire", "dublin-core", "opengraph", "meta")
FURNITURE = NAV | ASIDE | FOOTER | COMMENTS
MAX_HEADING = 500
BYLINE_WINDOW = 8
MAX_BYLINE = 200
_BYLINE = re.compile(r"^(?:written\s+)?by[:\s]\s*(?P<names>.+)", re.IGNORECASE)
# Where the names in a byline end: a date, a job title or a separator after them.
_BYLINE_END = re.compile(
    r"\s*(?:[,|\u2022\u00b7]|\s[-\u2013\u2014]\s|\bon\b|\bupdated\b|\bpublished\b|\d).*$", re.IGNORECASE
)
# A line that dates an update, not the publication (unless it says both).
_UPDATED = re.compile(
    r"^(?!.*(?:published|veröffentlicht|publié|publicado)).*"
    r"(?:updated|modified|aktualisiert|geändert|mis à jour|actualizado)",
    re.IGNORECASE,
)
_NAME_PARTICLES = frozenset(
    {"and", "und", "de", "da", "di", "van", "von", "der", "den", "la", "le", "du", "&"}
)
_URL_DATE = re.compile(r"/((?:19|20)\d{2})[/-](0?[1-9]|1[0-2])[/-](0?[1-9]|[12]\d|3[01])(?=[/._-]|$)")
# The guardian's table with no operator ranges: what no deployment's default lets anyone fetch.
_ADDRESSES = AddressPolicy()
_URL_COMPACT_DATE = re.compile(r"/((?:19|20)\d{2})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(?=/)")


async def html_metadata(
    reduction: Reduction, url: str, content_language: str | None, budget: CpuBudget
) -> tuple[PageMetadata, int]:
    """The page's metadata and the invisible characters removed from it."""
    declared = reduction.declarations
    found = await _jsonld(declared, budget)
    built = Builder()
    host = _host(url)
    _site_names(built, declared, found)
    site = built.metadata["site_name"]
    _headline(built, declared, found, reduction, site, host)
    _dates(built, declared, found, reduction)
    _authors(built, declared, found)
    built.text("description", found.description, "json-ld")
    _each(built.text, "description", declared, DESCRIPTIONS)
    built.language(found.language, "json-ld")
    for source in ORDER:
        for key in LANGUAGES.get(source, ()):
            for value in declared.values(key):
                built.language(value, source)
    built.language(declared.lang, "html")
    built.language(content_language if content_language and "," not in content_language else None, "meta")
    built.url(_canonical(declared.canonical, url), "html")
    built.url(_canonical(declared.first("og:url"), url), "opengraph")
    built.url(_canonical(found.url, url), "json-ld")
    built.kind(found.type, "json-ld")
    built.kind(declared.first("og:type"), "opengraph")
    built.kind(declared.first("dc.type", "dcterms.type"), "dublin-core")
    built.doi(found.doi, "json-ld")
    for source in ORDER:
        for key in DOIS.get(source, ()):
            for value in declared.values(key):
                built.doi(value, source)
    _undeclared(built, reduction, url)
    return built.metadata, built.hidden_removed


async def _jsonld(declared: Declarations, budget: CpuBudget) -> jsonld.JsonLd:
    """The scripts parsed and read one at a time, pausing after each; none once the budget is spent."""
    found = jsonld.JsonLd()
    for text in declared.jsonld:
        if budget.exhausted:
            break
        value = jsonld.parse(text)
        await budget.pause()
        if value is not None:
            jsonld.read_into(found, value)
            await budget.pause()
    return found


def _each(
    offer: Callable[[str, str | None, str], None],
    name: str,
    declared: Declarations,
    table: dict[str, tuple[str, ...]],
) -> None:
    for source in ORDER:
        for key in table.get(source, ()):
            offer(name, declared.first(key), source)


def _site_names(built: Builder, declared: Declarations, found: jsonld.JsonLd) -> None:
    # A WebSite's name and og:site_name name the site; a publisher is the organisation behind it
    # ("The Real Deal" publishes the site "The Real Deal New York"), so it comes after them.
    built.text("site_name", found.site_name, "json-ld")
    built.text("site_name", declared.first("og:site_name"), "opengraph")
    built.text("site_name", found.publisher, "json-ld")
    _each(built.text, "site_name", declared, SITE_NAMES)


def _headline(
    built: Builder,
    declared: Declarations,
    found: jsonld.JsonLd,
    reduction: Reduction,
    site: str | None,
    host: str | None,
) -> None:
    def offer(raw: str | None, source: str) -> None:
        if raw is not None and not built.has("headline"):
            cleaned = built.cleaner.text(raw, 4 * MAX_HEADING)
            if cleaned is not None and site is not None:
                cleaned = without_site(cleaned, site, None, guess=False)
            built.text("headline", cleaned, source)

    offer(found.headline, "json-ld")
    for source in ORDER:
        for key in HEADLINES.get(source, ()):
            offer(declared.first(key), source)
    if built.has("headline"):
        return
    heading = main_heading(reduction)
    title = reduction.title
    if heading and (not title or contains(title, heading)):
        built.text("headline", heading, "html")
    elif title:
        built.text("headline", without_site(title, site, host, guess=True), "html")
    else:
        built.text("headline", heading, "html")


def _dates(built: Builder, declared: Declarations, found: jsonld.JsonLd, reduction: Reduction) -> None:
    built.date("published", found.published, "json-ld")
    for source in ORDER:
        for key in PUBLISHED.get(source, ()):
            built.date("published", declared.first(key), source)
    built.date("modified", found.modified, "json-ld")
    for source in ORDER:
        for key in MODIFIED.get(source, ()):
            built.date("modified", declared.first(key), source)
    times = declared.times
    for role in ("published", "modified"):
        for tag in times:
            if tag.role == role:
                built.date(role, tag.datetime, "time")
    for item in declared.item_dates:
        if item.value is not None:
            built.date("published", item.value, "meta")
        elif not item.furniture:
            built.date("published", _shown_date(reduction, item.block), "html")


def _authors(built: Builder, declared: Declarations, found: jsonld.JsonLd) -> None:
    built.authors(found.authors, "json-ld", split=len(found.authors) == 1)
    built.authors([last_first(name) for name in declared.values("citation_author")], "highwire")
    for source in ("dublin-core", "opengraph", "meta"):
        for key in AUTHORS[source]:
            built.authors(declared.values(key), source, split=source == "meta")


def _undeclared(built: Builder, reduction: Reduction, url: str) -> None:
    """The URL's date and the byline: only for what no declaration gave."""
    if not built.has("published"):
        built.date("published", url_date(url), "url")
    if not built.has("published"):
        # A <time> that says nothing of what it dates: the article's own, or a teaser's in a
        # "related" rail inside it. The URL's date, when there is one, is the surer of the two.
        times = reduction.declarations.times
        in_content = [tag for tag in times if tag.in_content and not tag.furniture and not tag.role]
        elsewhere = [tag for tag in times if not tag.furniture and not tag.role]
        for tag in in_content or elsewhere[:1]:
            built.date("published", tag.datetime, "time")
    if built.has("published") and built.has("author"):
        return
    line = byline(reduction)
    if line is not None:
        names, date = line
        if names:
            built.authors([names], "byline", split=True)
        if date:
            built.date("published", date, "byline")
    if not built.has("published"):
        built.date("published", byline_date(reduction), "byline")


def _shown_date(reduction: Reduction, block: int) -> str | None:
    """The date a microdata element shows as its text: in the block it joined or opened."""
    for candidate in reduction.blocks[block : block + 2]:
        if len(candidate.text) <= MAX_BYLINE:
            found = date_in_text(candidate.text)
            if found is not None:
                return found
    return None


def byline_date(reduction: Reduction) -> str | None:
    """A date shown in a short line near the headline ("Published 7 January 2023", "07.01.2023 |
    Politics"), not in the page's furniture or its own header (where today's date stands), and not
    on a line that says it is an update."""
    blocks = reduction.blocks
    start = next(
        (i for i, block in enumerate(blocks) if block.kind == "h1" and not block.bits & FURNITURE), None
    )
    if start is None:
        return None
    for block in blocks[max(0, start - 2) : start + BYLINE_WINDOW]:
        text = block.text
        if len(text) > MAX_BYLINE or block.bits & (FURNITURE | HEADER) or _UPDATED.search(text):
            continue
        found = date_in_text(text)
        if found is not None:
            return found
    return None


def main_heading(reduction: Reduction) -> str | None:
    """The text of the first ``<h1>`` outside the page's furniture."""
    for block in reduction.blocks:
        if block.kind == "h1" and not block.bits & FURNITURE:
            return block.text[:MAX_HEADING]
    return None


def byline(reduction: Reduction) -> tuple[str | None, str | None] | None:
    """The names and the date of a "By ..." line near the headline (or the page's top)."""
    blocks = reduction.blocks
    start = next(
        (i for i, block in enumerate(blocks) if block.kind == "h1" and not block.bits & FURNITURE), 0
    )
    for block in blocks[max(0, start - 2) : start + BYLINE_WINDOW]:
        text = " ".join(block.text[: 2 * MAX_BYLINE].split())
        if len(text) > MAX_BYLINE or block.bits & FURNITURE:
            continue
        match = _BYLINE.match(text)
        if match is None:
            continue
        names = _BYLINE_END.sub("", match.group("names")).strip()
        return (names if _names_like(names) else None), date_in_text(text)
    return None


def _names_like(text: str) -> bool:
    """ "Jane Doe and John Roe" reads as names; "the way, this..." does not."""
    words = text.split()
    return 0 < len(words) <= 12 and all(
        word[0].isupper() or word.lower() in _NAME_PARTICLES for word in words
    )


def url_date(url: str) -> str | None:
    path = url.split("?", 1)[0].split("#", 1)[0]
    match = _URL_DATE.search(path) or _URL_COMPACT_DATE.search(path)
    if match is None:
        return None
    year, month, day = match.groups()
    return iso_date(f"{year}-{int(month):02d}-{int(day):02d}")


def _canonical(href: str | None, url: str) -> str | None:
    """``href`` resolved against the page, when it is an https URL the guardian would fetch: an
    address the guardian's table refuses (127.0.0.2, 169.254.169.254, [::1]) is dropped, unless it
    is the page's own host, which the guardian (with the operator's allow ranges) already let us
    fetch."""
    if not href:
        return None
    resolver = LinkResolver(None, url)
    resolver.add([href[:2000]])
    if not resolver.links:
        return None
    canonical = resolver.links[0]
    try:
        target = parse_https_url(canonical)
    except (DestinationBlocked, SchemeNotAllowed):
        return None
    if target.address is None or _ADDRESSES.classify(target.address).allowed:
        return canonical
    try:
        page = parse_https_url(url)
    except (DestinationBlocked, SchemeNotAllowed):
        return None
    return canonical if page.address == target.address else None


def _host(url: str) -> str | None:
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[0].split(":", 1)[0] or None
