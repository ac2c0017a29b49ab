"""JSON-LD (schema.org) as the few fields metadata reads: the page's main entity and its publisher.

Each script is parsed with orjson and walked iteratively, never recursively, within bounds: at
most MAX_NODES objects, MAX_LIST items of any array and MAX_DEPTH levels are looked at, so a
10,000-entry ``@graph`` or an array nested 10,000 deep costs what the bounds allow (orjson itself
refuses nesting past 1,024). A script that is not JSON is tried once more without what pages wrap
it in (a BOM, ``<!-- -->``, ``<![CDATA[ ]]>``, ``//`` and ``/* */`` comment lines) and is
otherwise ignored. The main entity is the first article-like object (Article, NewsArticle,
BlogPosting, Report, ScholarlyArticle...), else the first page-like one (WebPage...), wherever it
sits: top level, in ``@graph``, or under ``mainEntity``; a WebPage also holding what an article
lacks (its dates, its language) fills the gaps. Values may be strings, objects, arrays of either,
or ``{"@id": ...}`` references to another object of the same script.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import orjson

# A JSON-LD node as the page wrote it: arbitrary JSON, each value checked where it is read.
Node: TypeAlias = "dict[str, Any]"
MAX_NODES = 2000
MAX_LIST = 200
MAX_DEPTH = 16
MAX_AUTHOR_VALUES = 40
MAX_UNWRAP = 64 * 1024

ARTICLE_TYPES = frozenset(
    {
        "article",
        "newsarticle",
        "blogposting",
        "report",
        "scholarlyarticle",
        "medicalscholarlyarticle",
        "techarticle",
        "analysisnewsarticle",
        "opinionnewsarticle",
        "reportagenewsarticle",
        "reviewnewsarticle",
        "backgroundnewsarticle",
        "askpublicnewsarticle",
        "liveblogposting",
        "claimreview",
        "socialmediaposting",
        "discussionforumposting",
        "posting",
        "review",
        "criticreview",
        "thesis",
        "chapter",
        "book",
        "creativework",
        "legislation",
        "pressrelease",
        "dataset",
        "videoobject",
        "podcastepisode",
        "howto",
        "recipe",
    }
)
PAGE_TYPES = frozenset(
    {
        "webpage",
        "aboutpage",
        "itempage",
        "collectionpage",
        "profilepage",
        "qapage",
        "faqpage",
        "medicalwebpage",
        "contactpage",
        "checkoutpage",
        "realestatelisting",
    }
)
SITE_TYPES = frozenset({"website"})
# Comments only where a line starts with one: "//" and "/*" inside a string ("https://...") stay.
# Both are linear: no pattern here can rescan the text after a failed match.
_COMMENT_LINE = re.compile(r"^[ \t]*//[^\n]*", re.MULTILINE)
_BLOCK_START = re.compile(r"^[ \t]*/\*", re.MULTILINE)
_WRAPPERS = ("<!--", "-->", "<![CDATA[", "]]>")


@dataclass
class JsonLd:
    """The values read, raw (cleaning, dates and caps are values.py's and dates.py's)."""

    type: str | None = None
    headline: str | None = None
    published: str | None = None
    modified: str | None = None
    authors: list[str] = field(default_factory=list)
    site_name: str | None = None  # a WebSite's name
    publisher: str | None = None  # the main entity's publisher's name
    description: str | None = None
    language: str | None = None
    url: str | None = None
    doi: str | None = None


def parse(text: str) -> Any:
    """The script's JSON, or None when it is not JSON even without its wrappers (tried only on
    a script of at most MAX_UNWRAP characters: real wrapped JSON-LD is small)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        if len(text) > MAX_UNWRAP:
            return None
    cleaned = text.lstrip("\ufeff \t\r\n")
    for wrapper in _WRAPPERS:
        cleaned = cleaned.replace(wrapper, "")
    if "/" in cleaned:
        cleaned = _without_block_comments(_COMMENT_LINE.sub("", cleaned))
    try:
        return orjson.loads(cleaned)
    except orjson.JSONDecodeError:
        return None


def _without_block_comments(text: str) -> str:
    pieces: list[str] = []
    position = 0
    while (start := _BLOCK_START.search(text, position)) is not None:
        end = text.find("*/", start.end())
        if end == -1:
            break  # unclosed: not JSON either way, and the rest need not be searched again
        pieces.append(text[position : start.start()])
        position = end + 2
    pieces.append(text[position:])
    return "".join(pieces)


def read(scripts: list[Any]) -> JsonLd:
    """What the parsed scripts declare: for each field, the first script that declares it."""
    found = JsonLd()
    for value in scripts:
        read_into(found, value)
    return found


def read_into(found: JsonLd, value: Any) -> None:
    """Fill what ``found`` still lacks from one parsed script."""
    nodes = _objects(value)
    # A reference ({"@id": ...} alone) is not the object it names.
    ids: dict[str, Node] = {}
    for node in nodes:
        if isinstance(node.get("@id"), str) and len(node) > 1:
            ids.setdefault(node["@id"], node)
    article = next((node for node in nodes if _types(node) & ARTICLE_TYPES), None)
    page = next((node for node in nodes if _types(node) & PAGE_TYPES), None)
    if article is None and page is None:
        # An object of a kind not listed that still says when it was published or its headline.
        article = next((node for node in nodes if "datePublished" in node or "headline" in node), None)
    site = next((node for node in nodes if _types(node) & SITE_TYPES), None)
    for entity in (article, page):
        if entity is not None:
            _fill(found, entity, ids)
    if site is not None and found.site_name is None:
        found.site_name = _name(site, ids)
    if found.language is None and site is not None:
        found.language = _language(site.get("inLanguage"), ids)


def _objects(value: Any) -> list[Node]:
    """The objects in ``value`` in document order, within the bounds."""
    nodes: list[Node] = []
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack and len(nodes) < MAX_NODES:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            continue
        if isinstance(item, dict):
            nodes.append(item)
            children = [child for child in item.values() if isinstance(child, (dict, list))]
        elif isinstance(item, list):
            children = [child for child in item[:MAX_LIST] if isinstance(child, (dict, list))]
        else:
            continue
        stack.extend((child, depth + 1) for child in reversed(children[:MAX_LIST]))
    return nodes


def _types(node: Node) -> set[str]:
    kind = node.get("@type")
    if isinstance(kind, str):
        return {_short(kind)}
    if isinstance(kind, list):
        return {_short(item) for item in kind[:8] if isinstance(item, str)}
    return set()


def _short(kind: str) -> str:
    return kind.rsplit("/", 1)[-1].rsplit(":", 1)[-1].lower()


def _fill(found: JsonLd, node: Node, ids: dict[str, Node]) -> None:
    if found.type is None:
        found.type = _string(node.get("@type"))  # of ["Article", "BlogPosting"], the first
    if found.headline is None:
        found.headline = _string(node.get("headline")) or _string(node.get("name"))
    if found.published is None:
        found.published = _string(node.get("datePublished")) or _string(node.get("dateCreated"))
    if found.modified is None:
        found.modified = _string(node.get("dateModified"))
    if not found.authors:
        found.authors = _names(node.get("author"), ids) or _names(node.get("creator"), ids)
    if found.publisher is None:
        publisher = _resolve(_first(node.get("publisher")), ids)
        if isinstance(publisher, dict):
            found.publisher = _name(publisher, ids)
    if found.site_name is None:
        part_of = _resolve(_first(node.get("isPartOf")), ids)
        if isinstance(part_of, dict) and _types(part_of) & SITE_TYPES:
            found.site_name = _name(part_of, ids)
    if found.description is None:
        found.description = _string(node.get("description"))
    if found.language is None:
        found.language = _language(node.get("inLanguage"), ids)
    if found.url is None:
        entity = _resolve(_first(node.get("mainEntityOfPage")), ids)
        found.url = (
            _string(entity)
            or (_string(entity.get("@id")) if isinstance(entity, dict) else None)
            or _string(node.get("url"))
        )
    if found.doi is None:
        found.doi = _doi(node)


def _first(value: Any) -> Any:
    if isinstance(value, list):
        return value[0] if value else None
    return value


def _string(value: Any) -> str | None:
    value = _first(value)
    return value if isinstance(value, str) else None


def _resolve(value: Any, ids: dict[str, Node]) -> Any:
    """A ``{"@id": ...}`` reference as the object it names, when the script holds it."""
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("@id"), str):
        return ids.get(value["@id"], value)
    return value


def _name(node: Node, ids: dict[str, Node]) -> str | None:
    name = _string(node.get("name"))
    if name is None:
        given, family = _string(node.get("givenName")), _string(node.get("familyName"))
        if given or family:
            name = " ".join(part for part in (given, family) if part)
    return name or _string(node.get("alternateName"))


def _names(value: Any, ids: dict[str, Node]) -> list[str]:
    items = value[:MAX_AUTHOR_VALUES] if isinstance(value, list) else [value]
    names: list[str] = []
    for item in items:
        item = _resolve(item, ids)
        if isinstance(item, str):
            names.append(item)
        elif isinstance(item, dict):
            name = _name(item, ids)
            if name:
                names.append(name)
        elif isinstance(item, list):  # an array where an object belongs: its first object
            inner = _resolve(_first(item), ids)
            if isinstance(inner, dict) and (name := _name(inner, ids)):
                names.append(name)
    return names


def _language(value: Any, ids: dict[str, Node]) -> str | None:
    value = _resolve(_first(value), ids)
    if isinstance(value, dict):
        return _string(value.get("alternateName")) or _string(value.get("name"))
    return value if isinstance(value, str) else None


def _doi(node: Node) -> str | None:
    for key in ("doi", "identifier", "sameAs"):
        values = node.get(key)
        for value in values[:MAX_LIST] if isinstance(values, list) else [values]:
            if isinstance(value, dict):
                if str(value.get("propertyID", "")).lower() == "doi":
                    value = value.get("value")
                else:
                    continue
            if isinstance(value, str) and ("10." in value) and (key == "doi" or "doi" in value.lower()):
                return value
    return None
