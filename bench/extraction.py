"""Extraction quality and speed on the development corpora, beside the anchors, in one run.

Each page goes through ``build_document``, the code path fetch_page uses (bytes plus a Content-Type,
no network), in both modes. The metrics are the ones each corpus's SOURCE.txt defines:

- zyte-dev: 4-token shingles of ``\\w+`` tokens, per-page TP/FP/FN normalised to sum 1, precision
  and recall averaged over pages, F1 their harmonic mean (scrapinghub/article-extraction-benchmark).
- multilingual-dev: whitespace-collapsed "with" segments found (TP) or missing (FN), "without"
  segments found (FP), pooled over the corpus (trafilatura's evaluation).

Pages are served to the reducer as ``text/html`` with no charset, as many servers send them, so the
page's own declaration or the UTF-8 check decides the encoding. When trafilatura (and
readability-lxml) are installed (``pip install -e '.[bench]'``), their figures from the same pages
in the same run are printed beside ours.

Times are CPU milliseconds per page (process time), for us and for the others alike: wall time on
a shared machine measures the neighbours as much as the code.

Where the errors are, not only the averages:

- ``--worst N`` lists the N pages where our main mode loses most, with the others' counts beside.
- ``--languages`` prints F1 per language of the page (identified on the reference text with
  py3langid, from the ``bench`` extra) for every extractor.
- ``--halves`` splits each corpus in two fixed halves (by a hash of the page's key) and prints F1
  on each: a rule tuned on one half must hold on the other.

Both formats: every page is also read with ``format="markdown"``, the Markdown's syntax stripped
(markdown-it-py's tokens rendered to their text) and scored the same way; the two are printed side
by side with their CPU time (target: Markdown within 0.003 F1 of the text, and at most 20 % more
time; the reducer carries the structure in both formats, so the difference is what rendering
Markdown costs).

The Markdown's links are numbered references to the result's ``links`` (``[text][n]``); it is read
with those links written as definitions after it (bench/structure.py writes them), as a renderer
given the result would show it. Its size is printed against the text format's (target: at most
1.08 times its characters), and so is how many of the pages' own headings and list items it marks,
beside trafilatura's Markdown (bench/structure.py says how the gold is read from the markup).

Usage: ``python bench/extraction.py [--corpus NAME] [--worst N] [--languages] [--halves]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import json
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.structure import Gold, Tally, gold, references  # noqa: E402
from jobs.reader.document import build_document  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "extraction"
MAX_CHARS = 40_000
CPU_BUDGET_S = 3.0
TARGETS = {
    "zyte-dev": "F1 above trafilatura's, recall >= 0.97, p50 <= 30 ms, no empty page",
    "multilingual-dev": "F1 above trafilatura's, recall >= 0.95, p50 <= 30 ms, no empty page",
}
ANCHORS = {
    "zyte-dev": "published on this half: trafilatura 0.966, Readability.js 0.958, readability-lxml 0.936",
    "multilingual-dev": "published on the whole corpus: trafilatura 2.2 0.924, readability-lxml 0.826",
}
MAIN = "ours main"
MIN_LANGUAGE_PAGES = 5  # languages with fewer pages are pooled as "other"


@dataclass
class Page:
    key: str
    url: str
    body: bytes
    truth: dict[str, object]
    language: str = "?"


@dataclass
class Run:
    name: str
    texts: dict[str, str] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    fell_back: set[str] = field(default_factory=set)
    raw: dict[str, str] = field(default_factory=dict)  # the result's text as the agent gets it
    resolved: dict[str, str] = field(default_factory=dict)  # Markdown with its references defined


# Metrics ------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\w+", re.UNICODE | re.MULTILINE | re.IGNORECASE | re.DOTALL)


def _shingles(text: str, n: int = 4) -> Counter[tuple[str, ...]]:
    tokens = _TOKEN.findall(text or "")
    return Counter(tuple(tokens[i : i + n]) for i in range(max(1, len(tokens) - n + 1)) if tokens[i : i + n])


def shingle_counts(true: str, pred: str) -> tuple[float, float, float]:
    t, p = _shingles(true), _shingles(pred)
    tp = fp = fn = 0.0
    for key in set(t) | set(p):
        tc, pc = t.get(key, 0), p.get(key, 0)
        tp += min(tc, pc)
        fp += max(0, pc - tc)
        fn += max(0, tc - pc)
    total = tp + fp + fn
    return (tp / total, fp / total, fn / total) if total else (tp, fp, fn)


def zyte_scores(pages: list[Page], texts: dict[str, str]) -> tuple[float, float, float]:
    counts = [shingle_counts(str(p.truth["articleBody"]), texts[p.key]) for p in pages]
    precisions = [
        1.0 if fp == fn == 0 else 0.0 if tp == fp == 0 else tp / (tp + fp)
        for tp, fp, fn in counts
        if tp + fp > 0
    ]
    recalls = [
        1.0 if fp == fn == 0 else 0.0 if tp == fn == 0 else tp / (tp + fn)
        for tp, fp, fn in counts
        if tp + fn > 0
    ]
    precision = statistics.mean(precisions) if precisions else 0.0
    recall = statistics.mean(recalls) if recalls else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return f1, precision, recall


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def segment_counts(truth: dict[str, object], text: str) -> tuple[int, int, int]:
    normalized = _norm(text)
    with_ = [str(s) for s in truth["with"]]  # type: ignore[attr-defined]
    without = [str(s) for s in truth["without"]]  # type: ignore[attr-defined]
    tp = sum(1 for s in with_ if _norm(s) in normalized)
    fp = sum(1 for s in without if _norm(s) in normalized)
    return tp, fp, len(with_) - tp


def multilingual_scores(pages: list[Page], texts: dict[str, str]) -> tuple[float, float, float]:
    tp = fp = fn = 0
    for page in pages:
        a, b, c = segment_counts(page.truth, texts[page.key])
        tp, fp, fn = tp + a, fp + b, fn + c
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    return f1, precision, recall


SCORERS: dict[str, Callable[[list[Page], dict[str, str]], tuple[float, float, float]]] = {
    "zyte-dev": zyte_scores,
    "multilingual-dev": multilingual_scores,
}


def page_errors(corpus: str, page: Page, text: str) -> tuple[float, str]:
    """How much a page's extraction misses (higher is worse), and its counts for people."""
    if corpus == "zyte-dev":
        tp, fp, fn = shingle_counts(str(page.truth["articleBody"]), text)
        return fp + fn, f"fp {fp:.2f} fn {fn:.2f}"
    tp, fp, fn = segment_counts(page.truth, text)
    return float(fp + fn), f"tp {tp} fp {fp} fn {fn}"


# Corpora ------------------------------------------------------------------------------------


def load(corpus: str) -> list[Page] | None:
    folder = DATA / corpus
    if not folder.is_dir():
        return None
    pages: list[Page] = []
    if corpus == "zyte-dev":
        truth = json.loads((folder / "ground-truth.json").read_text(encoding="utf-8"))
        for key, item in sorted(truth.items()):
            body = gzip.decompress((folder / "html" / f"{key}.html.gz").read_bytes())
            pages.append(Page(key, str(item.get("url") or "https://example.org/"), body, item))
    else:
        truth = json.loads((folder / "evaldata.json").read_text(encoding="utf-8"))
        for url, item in sorted(truth.items()):
            body = gzip.decompress((folder / "html" / f"{item['file']}.gz").read_bytes())
            pages.append(Page(url, url, body, item))
    return pages


def reference_text(page: Page) -> str:
    if "articleBody" in page.truth:
        return str(page.truth["articleBody"])
    return " ".join(str(s) for s in page.truth["with"])  # type: ignore[attr-defined]


def identify_languages(pages: list[Page]) -> bool:
    """Label each page with the language of its reference text; False when py3langid is absent."""
    try:
        import py3langid
    except ImportError:
        return False
    counts: Counter[str] = Counter()
    for page in pages:
        page.language = str(py3langid.classify(reference_text(page))[0])
        counts[page.language] += 1
    for page in pages:
        if counts[page.language] < MIN_LANGUAGE_PAGES:
            page.language = "other"
    return True


def half(page: Page) -> int:
    """A fixed half of the corpus the page belongs to, the same in every run."""
    return hashlib.sha256(page.key.encode()).digest()[0] & 1


# Runs ---------------------------------------------------------------------------------------


async def run_ours(pages: list[Page], extract: str, fmt: str = "text") -> Run:
    run = Run(f"ours {extract}" if fmt == "text" else f"ours {extract} {fmt}")
    for page in pages:
        started = time.process_time()
        document = await build_document(
            page.body,
            "text/html",
            page.url if page.url.startswith("https://") else "https://example.org/",
            extract=extract,
            max_chars=MAX_CHARS,
            cpu_budget_s=CPU_BUDGET_S,
            body_truncated=False,
            format=fmt,
        )
        run.seconds.append(time.process_time() - started)
        run.raw[page.key] = document.text
        run.resolved[page.key] = f"{document.text}\n\n{references(document.links)}"
        run.texts[page.key] = document.text if fmt == "text" else markdown_text(run.resolved[page.key])
        if extract == "main" and document.extraction == "full":
            run.fell_back.add(page.key)
    return run


def run_competitor(pages: list[Page], name: str, extract: Callable[[bytes], str]) -> Run:
    run = Run(name)
    for page in pages:
        started = time.process_time()
        try:
            text = extract(page.body) or ""
        except Exception:  # a crash counts as an empty extraction, as the benchmarks count it
            text = ""
        run.seconds.append(time.process_time() - started)
        run.texts[page.key] = text
    return run


def competitors() -> dict[str, Callable[[bytes], str]]:
    found: dict[str, Callable[[bytes], str]] = {}
    try:
        import trafilatura

        def traf(body: bytes) -> str:
            return trafilatura.extract(body, include_comments=False, include_tables=True) or ""

        found[f"trafilatura {trafilatura.__version__}"] = traf
    except ImportError:
        print("trafilatura is not installed: pip install -e '.[bench]' to see its figures")
    try:
        import lxml.html
        from readability import Document as ReadabilityDocument
        from trafilatura.utils import decode_file

        def readability(body: bytes) -> str:
            summary = ReadabilityDocument(decode_file(body)).summary()
            return str(lxml.html.fromstring(summary).text_content()) if summary.strip() else ""

        found["readability-lxml"] = readability
    except ImportError:
        pass
    return found


def markdown_text(markdown: str) -> str:
    """The text a reader of the Markdown sees: markdown-it's tokens, syntax dropped, a block per line."""
    from markdown_it import MarkdownIt

    lines: list[str] = []
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        if token.type == "inline":
            lines.append("".join(_inline_text(child) for child in token.children or []))
        elif token.type in ("fence", "code_block", "html_block"):
            lines.append(token.content.rstrip("\n"))
    return "\n".join(lines)


def _inline_text(token: object) -> str:
    kind = getattr(token, "type", "")
    if kind in ("text", "code_inline"):
        return str(getattr(token, "content", ""))
    return "\n" if kind in ("softbreak", "hardbreak") else ""


# Reports ------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def report(corpus: str, pages: list[Page], runs: list[Run]) -> None:
    print(f"\n{corpus}: {len(pages)} pages. target: {TARGETS[corpus]}")
    print(f"anchors: {ANCHORS[corpus]}")
    print(
        f"{'':24} {'F1':>6} {'prec':>6} {'recall':>6} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'fell back':>9} {'empty':>6}"
    )
    for run in runs:
        f1, precision, recall = SCORERS[corpus](pages, run.texts)
        ms = [s * 1000 for s in run.seconds]
        empty = sum(1 for p in pages if not run.texts[p.key].strip())
        fell_back = str(len(run.fell_back)) if run.name == MAIN else "-"
        print(
            f"{run.name:24} {f1:6.3f} {precision:6.3f} {recall:6.3f} {percentile(ms, 50):8.1f} "
            f"{percentile(ms, 99):8.1f} {fell_back:>9} {empty:>6}"
        )
    print("(times: CPU ms per page)")


def report_formats(corpus: str, pages: list[Page], text_runs: list[Run], markdown_runs: list[Run]) -> None:
    """The two formats side by side: F1 and CPU time of the same pages."""
    print(
        f"\nformats on {corpus}: text vs markdown (syntax stripped); target: within 0.003 F1, time <= +20 %"
    )
    print(
        f"{'':8} {'F1 text':>8} {'F1 md':>8} {'delta':>7} {'p50 text':>9} {'p50 md':>8} "
        f"{'CPU s text':>10} {'CPU s md':>9} {'time':>7}"
    )
    sizes: list[str] = []
    for text, markdown in zip(text_runs, markdown_runs, strict=True):
        f1_text = SCORERS[corpus](pages, text.texts)[0]
        f1_md = SCORERS[corpus](pages, markdown.texts)[0]
        total_text, total_md = sum(text.seconds), sum(markdown.seconds)
        print(
            f"{text.name.removeprefix('ours '):8} {f1_text:8.3f} {f1_md:8.3f} {f1_md - f1_text:+7.3f} "
            f"{percentile([s * 1000 for s in text.seconds], 50):9.1f} "
            f"{percentile([s * 1000 for s in markdown.seconds], 50):8.1f} {total_text:10.2f} {total_md:9.2f} "
            f"{(total_md / total_text - 1) * 100 if total_text else 0.0:+6.1f}%"
        )
        chars_text = sum(len(value) for value in text.raw.values())
        chars_md = sum(len(value) for value in markdown.raw.values())
        at_cap = sum(1 for value in markdown.raw.values() if len(value) >= MAX_CHARS)
        text_cap = sum(1 for value in text.raw.values() if len(value) >= MAX_CHARS)
        sizes.append(
            f"{text.name.removeprefix('ours '):8} {chars_text:10,} {chars_md:10,} "
            f"{chars_md / chars_text if chars_text else 0.0:7.3f}x {text_cap:>9}/{at_cap}"
        )
    print(f"\nMarkdown size on {corpus}: characters of the results; target: Markdown <= 1.08x the text")
    print(f"{'':8} {'text':>10} {'markdown':>10} {'ratio':>8} {'at the cap (text/md)':>20}")
    for line in sizes:
        print(line)


def report_structure(corpus: str, pages: list[Page], runs: dict[str, dict[str, str]]) -> None:
    """The share of the pages' own headings and list items each extractor's Markdown marks."""
    golds: dict[str, Gold] = {page.key: gold(page.body, reference_text(page)) for page in pages}
    print(f"\nstructure on {corpus}: headings and list items of the reference marked in the Markdown")
    print("target: ours main at least trafilatura's Markdown, each")
    tallies = {}
    for name, texts in runs.items():
        tally = Tally()
        for page in pages:
            tally.add(golds[page.key], texts[page.key])
        tallies[name] = tally
    first = next(iter(tallies.values()), Tally())
    print(f"{'':28} {'headings':>9} {'list items':>11}   (gold: {first.gold_headings}, {first.gold_items})")
    for name, tally in tallies.items():
        headings, items = tally.shares()
        print(f"{name:28} {headings:9.1%} {items:11.1%}")


def trafilatura_markdown(pages: list[Page]) -> dict[str, str] | None:
    try:
        import trafilatura
    except ImportError:
        return None
    found: dict[str, str] = {}
    for page in pages:
        try:
            text = trafilatura.extract(
                page.body, output_format="markdown", include_comments=False, include_tables=True
            )
        except Exception:  # a crash counts as an empty extraction
            text = None
        found[page.key] = text or ""
    return found


def report_groups(title: str, corpus: str, groups: dict[str, list[Page]], runs: list[Run]) -> None:
    """F1 of every extractor on each group of pages (a language, a half of the corpus)."""
    names = [run.name[:18] for run in runs]
    print(f"\n{title} on {corpus}: F1 (precision/recall of ours main)")
    print(f"{'':10} {'pages':>5} " + " ".join(f"{name:>18}" for name in names) + "   ours main P/R")
    for group, members in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])):
        scores = [SCORERS[corpus](members, run.texts) for run in runs]
        cells = " ".join(f"{f1:18.3f}" for f1, _, _ in scores)
        _, precision, recall = scores[0]
        print(f"{group:10} {len(members):5} {cells}   {precision:.3f}/{recall:.3f}")


def worst(corpus: str, pages: list[Page], runs: list[Run], count: int) -> None:
    main = runs[0]
    print(f"\nworst {count} pages of {main.name} on {corpus} (others' counts beside):")
    scored = []
    for page in pages:
        loss, detail = page_errors(corpus, page, main.texts[page.key])
        others = "; ".join(
            f"{run.name[:11]} {page_errors(corpus, page, run.texts[page.key])[1]}" for run in runs[2:]
        )
        mode = "full" if page.key in main.fell_back else "main"
        name = str(page.truth.get("file") or page.key[:16])
        scored.append((-loss, name, f"{detail} [{mode}, {page.language}] {name[:48]} | {others}"))
    for _, _, line in sorted(scored)[:count]:
        print(f"  {line}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--corpus", choices=sorted(SCORERS), action="append")
    parser.add_argument("--worst", type=int, default=0, help="list the N worst pages of our main mode")
    parser.add_argument("--languages", action="store_true", help="F1 per language of the page")
    parser.add_argument("--halves", action="store_true", help="F1 on each fixed half of each corpus")
    parser.add_argument("--ours-only", action="store_true", help="skip trafilatura and readability")
    parser.add_argument("--structure", action="store_true", help="only the headings and list items marked")
    args = parser.parse_args()
    others = {} if args.ours_only else competitors()
    ran = False
    for corpus in args.corpus or sorted(SCORERS, reverse=True):
        pages = load(corpus)
        if pages is None:
            print(f"{corpus}: skipped, {DATA / corpus} is absent")
            continue
        ran = True
        markdown_runs = [await run_ours(pages, "main", "markdown"), await run_ours(pages, "full", "markdown")]
        structured = {f"{run.name}": run.resolved for run in markdown_runs}
        if args.structure:
            if (theirs := trafilatura_markdown(pages)) is not None:
                structured["trafilatura markdown"] = theirs
            report_structure(corpus, pages, structured)
            continue
        runs = [await run_ours(pages, "main"), await run_ours(pages, "full")]
        runs += [run_competitor(pages, name, fn) for name, fn in others.items()]
        report(corpus, pages, runs)
        report_formats(corpus, pages, runs[:2], markdown_runs)
        if not args.ours_only and (theirs := trafilatura_markdown(pages)) is not None:
            structured["trafilatura markdown"] = theirs
        report_structure(corpus, pages, structured)
        if args.halves:
            halves: dict[str, list[Page]] = defaultdict(list)
            for page in pages:
                halves[f"half {half(page)}"].append(page)
            report_groups("fixed halves", corpus, halves, runs)
        if (args.languages or args.worst) and not identify_languages(pages):
            print("py3langid is not installed: pip install -e '.[bench]' to see languages")
        if args.languages:
            languages: dict[str, list[Page]] = defaultdict(list)
            for page in pages:
                languages[page.language].append(page)
            report_groups("languages", corpus, languages, runs)
        if args.worst:
            worst(corpus, pages, runs, args.worst)
    if not ran:
        print("no corpus found: nothing measured")


if __name__ == "__main__":
    asyncio.run(main())
