"""Metadata on the development corpora: how often the declared publication date, author and site
name are found, by us, htmldate and trafilatura, in one run; then the hostile family's stalls.

Neither corpus annotates metadata (zyte-dev has the article body and URL, multilingual-dev text
segments), so the ground truth is what each page declares, read by a deliberately plain reference
reader below (lxml's tree, stdlib json; no code shared with ours):

- a page **declares a publication date** when a JSON-LD object's ``datePublished``, or a meta tag
  among ``article:published_time``, ``og:published_time``, ``citation_publication_date``,
  ``citation_date``, ``dc.date``, ``dcterms.issued``, ``dcterms.date``, ``datePublished``
  (itemprop), ``pubdate``, ``publishdate``, ``publish-date``, ``date``, ``sailthru.date``,
  ``parsely-pub-date``, or a ``<time pubdate>`` / ``<time itemprop=datePublished>``, holds an
  ISO-like date (``YYYY-MM-DD``, ``YYYY/MM/DD``, ``YYYYMMDD``); the declared dates are all such
  dates (day precision). A tool finds it when its date's day is one of them.
- a page **declares an author** when a JSON-LD ``author`` (a string, an object's name, arrays of
  either) or a meta ``author``, ``citation_author``, ``dc.creator``, ``article:author`` (not a
  URL), ``parsely-author``, ``sailthru.author`` names one; a tool finds it when one of its names
  (trafilatura's "A; B" split) equals a declared name, case and spacing aside.
- a page **declares a site name** in ``og:site_name``, ``application-name``, or a JSON-LD
  ``publisher`` name or WebSite ``name``; found when the tool's site name equals one of them.

This measures how well each reader reads declarations, not whether the declarations are true;
since ours reads declarations by design, the figure that matters most for it is what it misses.
As a check that does not depend on the markup, pages whose URL carries a date (``/2019/03/01/``)
are scored against that date too. Times are CPU milliseconds per page (process time): ours for
the whole read (build_document, text included) and for the metadata step alone after the
reduction; htmldate's ``find_date`` and trafilatura's ``extract_metadata`` each parse the page
themselves. The hostile family (tests/support/hostile_metadata.py) is then read while a ticker
records the event loop's largest stall, beside the 20 ms anchor.

Usage: ``python bench/metadata.py [--corpus NAME] [--limit N] [--runs N]``; needs the ``bench`` extra for the
others (``pip install -e '.[bench]'``) and lxml for the reference reader.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.extraction import DATA, load  # noqa: E402
from bench.loop_lag import stall_while_reading  # noqa: E402
from jobs.reader.cpu_budget import CpuBudget  # noqa: E402
from jobs.reader.document import build_document, decode_paced, reduce_html  # noqa: E402
from jobs.reader.metadata.page import html_metadata  # noqa: E402
from tests.support.hostile_metadata import HOSTILE_SCRIPTS, ld  # noqa: E402

CORPORA = ("zyte-dev", "multilingual-dev")
TARGET_STALL_MS = 20.0
DATE_KEYS = frozenset(
    {
        "article:published_time",
        "og:published_time",
        "citation_publication_date",
        "citation_date",
        "dc.date",
        "dcterms.issued",
        "dcterms.date",
        "datepublished",
        "pubdate",
        "publishdate",
        "publish-date",
        "date",
        "sailthru.date",
        "parsely-pub-date",
    }
)
AUTHOR_KEYS = frozenset(
    {"author", "citation_author", "dc.creator", "article:author", "parsely-author", "sailthru.author"}
)
SITE_KEYS = frozenset({"og:site_name", "application-name"})
_ISO_DAY = re.compile(r"((?:19|20)\d{2})[-/]?(0[1-9]|1[0-2])[-/]?(0[1-9]|[12]\d|3[01])")
_URL_DAY = re.compile(r"/((?:19|20)\d{2})/(0?[1-9]|1[0-2])/(0?[1-9]|[12]\d|3[01])(?:/|$)")
_NOT_A_NAME = re.compile(r"^(?:https?://|www\.|\S+\.[a-z]{2,}$)", re.IGNORECASE)
_SPLIT = re.compile(r"\s*(?:;|,|\band\b)\s*")


@dataclass
class Declared:
    dates: set[str] = field(default_factory=set)
    authors: set[str] = field(default_factory=set)
    sites: set[str] = field(default_factory=set)
    url_day: str | None = None


@dataclass
class Found:
    date: str | None = None
    authors: list[str] = field(default_factory=list)
    site: str | None = None


@dataclass
class Tally:
    name: str
    seconds: list[float] = field(default_factory=list)
    hits: dict[str, int] = field(default_factory=lambda: {"date": 0, "author": 0, "site": 0, "url": 0})
    wrong: dict[str, int] = field(default_factory=lambda: {"date": 0, "author": 0, "site": 0, "url": 0})


def norm(text: str) -> str:
    """Case, spacing, a leading "by"/"von" and end punctuation aside."""
    bare = re.sub(r"^(?:by|von)\s+", "", text.strip(), flags=re.IGNORECASE)
    return " ".join(bare.casefold().split()).strip(".,;:")


def names_in(text: str) -> set[str]:
    """A declared author string as the names in it: whole, and split at ";", "," and "and"; a URL
    or a domain ("www.example.com") is no name."""
    if _NOT_A_NAME.match(text.strip()):
        return set()
    return {norm(text)} | {norm(part) for part in _SPLIT.split(text) if part.strip()}


def day(value: str | None) -> str | None:
    if not value:
        return None
    match = _ISO_DAY.search(value)
    return f"{match.group(1)}-{match.group(2)}-{match.group(3)}" if match else None


def plausible(value: str | None) -> str | None:
    """A declared day from 1990 to tomorrow: a page "declaring" 1970-01-01 declares nothing."""
    found = day(value)
    if found is None:
        return None
    try:
        moment = dt.date.fromisoformat(found)
    except ValueError:
        return None
    return found if dt.date(1990, 1, 1) <= moment <= dt.date.today() + dt.timedelta(days=1) else None


# The reference reader ---------------------------------------------------------------------------


def declared(body: bytes, url: str) -> Declared:

    found = Declared()
    url_match = _URL_DAY.search(url)
    if url_match:
        year, month, dd = url_match.groups()
        found.url_day = f"{year}-{int(month):02d}-{int(dd):02d}"
    tree = _tree(body)
    if tree is None:
        return found
    for meta in tree.iter("meta"):
        key = (meta.get("property") or meta.get("name") or meta.get("itemprop") or "").strip().lower()
        content = (meta.get("content") or "").strip()
        if not key or not content:
            continue
        key = key.replace("dc:", "dc.").replace("dcterms:", "dcterms.")
        if key in DATE_KEYS and (d := plausible(content)):
            found.dates.add(d)
        elif key in AUTHOR_KEYS:
            found.authors.update(names_in(content))
        elif key in SITE_KEYS:
            found.sites.add(norm(content))
    for time_tag in tree.iter("time"):
        marked = time_tag.get("pubdate") is not None or (time_tag.get("itemprop") or "") == "datePublished"
        if marked and (d := plausible(time_tag.get("datetime"))):
            found.dates.add(d)
    for script in tree.iter("script"):
        if (script.get("type") or "").strip().lower() != "application/ld+json":
            continue
        try:
            value = json.loads(script.text or "")
        except (ValueError, RecursionError):
            continue
        for node in _nodes(value, 0):
            if isinstance(node.get("datePublished"), str) and (d := plausible(node["datePublished"])):
                found.dates.add(d)
            found.authors.update(part for name in _names(node.get("author")) for part in names_in(name))
            publisher = node.get("publisher")
            found.sites.update(norm(name) for name in _names(publisher) if isinstance(publisher, dict | list))
            if node.get("@type") == "WebSite" and isinstance(node.get("name"), str):
                found.sites.add(norm(node["name"]))
    found.authors.discard("")
    found.sites.discard("")
    return found


def _tree(body: bytes) -> Any:
    """Undeclared UTF-8 is the common case lxml would read as Latin-1; other bytes (and a page
    whose XML declaration lxml refuses in a string) are left to lxml's reading of the page."""
    import lxml.etree
    import lxml.html

    for source in (body.decode("utf-8", "strict") if _utf8(body) else None, body):
        if source is None:
            continue
        try:
            return lxml.html.fromstring(source)
        except (ValueError, lxml.etree.ParserError):
            continue
    return None


def _utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _nodes(value: Any, depth: int) -> Iterator[dict[str, Any]]:
    if depth > 20:
        return
    if isinstance(value, dict):
        yield value
        for child in value.values():
            yield from _nodes(child, depth + 1)
    elif isinstance(value, list):
        for child in value[:1000]:
            yield from _nodes(child, depth + 1)


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        return [value["name"]]
    if isinstance(value, list):
        return [name for item in value[:50] for name in _names(item)]
    return []


# The readers measured ---------------------------------------------------------------------------


def ours(body: bytes, url: str) -> Found:
    document = asyncio.run(
        build_document(
            body, "text/html", url, extract="main", max_chars=40_000, cpu_budget_s=3.0, body_truncated=False
        )
    )
    metadata = document.metadata
    if metadata is None:
        return Found()
    return Found(metadata["published"], list(metadata["author"]), metadata["site_name"])


def ours_metadata_step(body: bytes, url: str) -> float:
    """CPU seconds of the metadata step alone, after the page is decoded and reduced."""

    async def run() -> float:
        budget = CpuBudget(3.0)
        reduction = await reduce_html(await decode_paced(body, None, "html", budget), budget)
        started = time.process_time()
        await html_metadata(reduction, url, None, CpuBudget(3.0))
        return time.process_time() - started

    return asyncio.run(run())


def htmldate_reader() -> Callable[[bytes, str], Found] | None:
    try:
        from htmldate import find_date
    except ImportError:
        return None

    def read(body: bytes, url: str) -> Found:
        return Found(find_date(body, url=url, original_date=True))

    return read


def trafilatura_reader() -> Callable[[bytes, str], Found] | None:
    try:
        from trafilatura import extract_metadata, load_html
    except ImportError:
        return None

    def read(body: bytes, url: str) -> Found:
        tree = load_html(body)
        if tree is None:
            return Found()
        document = extract_metadata(tree, default_url=url)
        authors = [name for name in _SPLIT.split(document.author or "") if name.strip()]
        return Found(document.date, authors, document.sitename)

    return read


# Scoring ----------------------------------------------------------------------------------------


def score(tally: Tally, truth: Declared, found: Found) -> None:
    got_day = day(found.date)
    if truth.dates and got_day:
        tally.hits["date"] += got_day in truth.dates
        tally.wrong["date"] += got_day not in truth.dates
    if truth.url_day and got_day:
        # A day either side: a declared UTC time is often the next day of the URL's local date.
        near = abs(dt.date.fromisoformat(got_day) - dt.date.fromisoformat(truth.url_day)) <= dt.timedelta(
            days=1
        )
        tally.hits["url"] += near
        tally.wrong["url"] += not near
    names = {part for name in found.authors for part in names_in(name)}
    if truth.authors and names:
        tally.hits["author"] += bool(names & truth.authors)
        tally.wrong["author"] += not names & truth.authors
    if truth.sites and found.site:
        tally.hits["site"] += norm(found.site) in truth.sites
        tally.wrong["site"] += norm(found.site) not in truth.sites


def run_corpus(corpus: str, limit: int | None) -> None:
    pages = load(corpus)
    if pages is None:
        print(f"{corpus}: not found under {DATA}; skipped")
        return
    pages = pages[:limit] if limit else pages
    readers: list[tuple[Tally, Callable[[bytes, str], Found]]] = [(Tally("ours"), ours)]
    for name, reader in (("htmldate", htmldate_reader()), ("trafilatura", trafilatura_reader())):
        if reader is None:
            print(f"{name} is not installed (pip install -e '.[bench]'): not measured")
        else:
            readers.append((Tally(name), reader))
    truths = [declared(page.body, page.url) for page in pages]
    step: list[float] = []
    for page, truth in zip(pages, truths, strict=True):
        for tally, reader in readers:
            started = time.process_time()
            found = reader(page.body, page.url)
            tally.seconds.append(time.process_time() - started)
            score(tally, truth, found)
        step.append(ours_metadata_step(page.body, page.url))
    counts = {
        "date": sum(bool(t.dates) for t in truths),
        "author": sum(bool(t.authors) for t in truths),
        "site": sum(bool(t.sites) for t in truths),
        "url": sum(bool(t.url_day) for t in truths),
    }
    print(
        f"\n{corpus}: {len(pages)} pages; declaring a date {counts['date']}, an author {counts['author']}, "
        f"a site name {counts['site']}; a date in the URL {counts['url']}"
    )
    heads = ("date", "author", "site name", "URL date +-1 d")
    print(f"{'reader':<12} " + " ".join(f"{head:>16}" for head in heads) + f" {'CPU ms p50':>11} {'mean':>7}")
    for tally, _ in readers:
        cells = [
            f"{tally.hits[k]:>4}/{counts[k]:<4}({tally.wrong[k]:>3}x)"
            for k in ("date", "author", "site", "url")
        ]
        ms = [s * 1000 for s in tally.seconds]
        print(
            f"{tally.name:<12} {' '.join(cells)} {statistics.median(ms):>11.2f} {statistics.fmean(ms):>7.2f}"
        )
    ms = [s * 1000 for s in step]
    print(
        f"ours, the metadata step alone: p50 {statistics.median(ms):.3f} ms, "
        f"mean {statistics.fmean(ms):.3f} ms, max {max(ms):.2f} ms"
    )
    print("cells: found/declaring (Nx: a value none of the declared ones); ours' time is the whole read")


async def hostile(runs: int) -> None:
    print(f"\nhostile JSON-LD: the event loop's largest stall while reading (anchor {TARGET_STALL_MS:g} ms)")
    for name, text in HOSTILE_SCRIPTS.items():
        body = f"<html><head>{ld(text)}</head><body><h1>H</h1><p>Text.</p></body></html>".encode()
        # The smallest of the runs' largest stalls: the reading's own stall shows in every run,
        # a neighbour taking the CPU for a moment does not (as bench/loop_lag.py measures).
        measured = [await stall_while_reading(body, "text/html", 3.0) for _ in range(runs)]
        stall = min(stall for stall, _, _ in measured)
        elapsed = min(elapsed for _, elapsed, _ in measured)
        print(f"  {name:<48} stall {stall * 1000:6.2f} ms   read in {elapsed * 1000:7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=CORPORA)
    parser.add_argument("--limit", type=int, help="read only the first N pages of each corpus")
    parser.add_argument("--runs", type=int, default=3, help="runs of each hostile page (the smallest stall)")
    args = parser.parse_args()
    try:
        import lxml.html  # noqa: F401
    except ImportError:
        print("lxml is not installed (pip install -e '.[bench]'): the reference reader needs it; skipped")
        return
    for corpus in [args.corpus] if args.corpus else CORPORA:
        run_corpus(corpus, args.limit)
    asyncio.run(hostile(args.runs))


if __name__ == "__main__":
    main()
