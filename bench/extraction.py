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
in the same run are printed beside ours. Usage: ``python bench/extraction.py [--worst N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jobs.reader.document import build_document  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "extraction"
MAX_CHARS = 40_000
CPU_BUDGET_S = 3.0
TARGETS = {
    "zyte-dev": "F1 >= 0.960, recall >= 0.97, p50 <= 30 ms, no empty page",
    "multilingual-dev": "F1 >= 0.930, recall >= 0.97, p50 <= 30 ms, no empty page",
}
ANCHORS = {
    "zyte-dev": "all text 0.65; trafilatura 2.3 0.957; readability-lxml 0.970 (issue 5)",
    "multilingual-dev": "trafilatura 2.3 0.919; readability-lxml 0.866 (issue 5)",
}


@dataclass
class Page:
    key: str
    url: str
    body: bytes
    truth: dict[str, object]


@dataclass
class Run:
    name: str
    texts: dict[str, str] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    over_cap: int = 0
    fell_back: int = 0


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


# Runs ---------------------------------------------------------------------------------------


async def run_ours(pages: list[Page], extract: str) -> Run:
    run = Run(f"ours {extract}")
    for page in pages:
        started = time.perf_counter()
        document = await build_document(
            page.body,
            "text/html",
            page.url if page.url.startswith("https://") else "https://example.org/",
            extract=extract,
            max_chars=MAX_CHARS,
            cpu_budget_s=CPU_BUDGET_S,
            body_truncated=False,
        )
        run.seconds.append(time.perf_counter() - started)
        run.texts[page.key] = document.text
        run.over_cap += len(document.text) >= MAX_CHARS and document.truncated
        run.fell_back += extract == "main" and document.extraction == "full"
    return run


def run_competitor(pages: list[Page], name: str, extract: Callable[[bytes], str]) -> Run:
    run = Run(name)
    for page in pages:
        started = time.perf_counter()
        try:
            text = extract(page.body) or ""
        except Exception:  # a crash counts as an empty extraction, as the benchmarks count it
            text = ""
        run.seconds.append(time.perf_counter() - started)
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


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def report(corpus: str, pages: list[Page], runs: list[Run]) -> None:
    print(f"\n{corpus}: {len(pages)} pages. target: {TARGETS[corpus]}")
    print(f"anchors: {ANCHORS[corpus]}")
    print(
        f"{'':24} {'F1':>6} {'prec':>6} {'recall':>6} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'over cap':>8} {'fell back':>9} {'empty':>6}"
    )
    for run in runs:
        f1, precision, recall = SCORERS[corpus](pages, run.texts)
        ms = [s * 1000 for s in run.seconds]
        empty = sum(1 for p in pages if not run.texts[p.key].strip())
        fell_back = str(run.fell_back) if run.name == "ours main" else "-"
        over_cap = str(run.over_cap) if run.name.startswith("ours") else "-"
        print(
            f"{run.name:24} {f1:6.3f} {precision:6.3f} {recall:6.3f} {percentile(ms, 50):8.1f} "
            f"{percentile(ms, 99):8.1f} {over_cap:>8} {fell_back:>9} {empty:>6}"
        )


def worst(corpus: str, pages: list[Page], run: Run, count: int) -> None:
    print(f"\nworst {count} pages of {run.name} on {corpus}:")
    scored = []
    for page in pages:
        text = run.texts[page.key]
        if corpus == "zyte-dev":
            tp, fp, fn = shingle_counts(str(page.truth["articleBody"]), text)
            scored.append((tp - max(fp, fn), page.key, f"tp {tp:.2f} fp {fp:.2f} fn {fn:.2f}"))
        else:
            tp, fp, fn = segment_counts(page.truth, text)
            scored.append((-(fp + 2 * fn), page.key, f"tp {tp} fp {fp} fn {fn} {page.truth['file']}"))
    for _, key, detail in sorted(scored)[:count]:
        print(f"  {detail}  {key[:90]}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--corpus", choices=sorted(SCORERS), action="append")
    parser.add_argument("--worst", type=int, default=0, help="list the N worst pages of our main mode")
    parser.add_argument("--ours-only", action="store_true", help="skip trafilatura and readability")
    args = parser.parse_args()
    others = {} if args.ours_only else competitors()
    ran = False
    for corpus in args.corpus or sorted(SCORERS, reverse=True):
        pages = load(corpus)
        if pages is None:
            print(f"{corpus}: skipped, {DATA / corpus} is absent")
            continue
        ran = True
        runs = [await run_ours(pages, "main"), await run_ours(pages, "full")]
        runs += [run_competitor(pages, name, fn) for name, fn in others.items()]
        report(corpus, pages, runs)
        if args.worst:
            worst(corpus, pages, runs[0], args.worst)
    if not ran:
        print("no corpus found: nothing measured")


if __name__ == "__main__":
    asyncio.run(main())
