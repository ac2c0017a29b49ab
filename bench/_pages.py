"""Synthetic article pages (20 KB to 500 KB) served over TLS for the fetch benchmarks.

Deterministic, generated here (no third-party pages): a header, a nav, an article of paragraphs
with inline links, a sidebar and a footer, like a news or blog page.
"""

from __future__ import annotations

import random

WORDS = [
    "company",
    "registry",
    "filing",
    "director",
    "annual",
    "report",
    "revenue",
    "subsidiary",
    "audit",
    "court",
    "ruling",
    "shareholder",
    "board",
    "capital",
    "merger",
    "acquisition",
    "license",
    "permit",
    "tender",
    "contract",
    "supplier",
    "customer",
    "complaint",
    "investigation",
    "fine",
    "penalty",
    "statement",
    "press",
    "release",
    "interview",
    "source",
]


def sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def article_page(index: int, size: int) -> bytes:
    rng = random.Random(index)
    head = (
        "<!doctype html><html><head><meta charset=utf-8>"
        f"<title>Article {index}</title><style>body{{font:16px serif}}</style>"
        "<script>window.analytics = {id: 1};</script></head><body>"
        "<header><nav>"
        + "".join(f'<a href="/section/{i}">Section {i}</a>' for i in range(12))
        + "</nav></header>"
        f"<main><article><h1>Article {index}</h1>"
    )
    tail = (
        "</article></main><aside>"
        + "".join(f'<a href="/related/{i}">Related {i}</a>' for i in range(15))
        + "</aside><footer><p>Copyright</p>"
        + "".join(f'<a href="/legal/{i}">Legal {i}</a>' for i in range(8))
        + "</footer></body></html>"
    )
    parts = [head]
    total = len(head) + len(tail)
    paragraph = 0
    while total < size:
        paragraph += 1
        text = " ".join(sentence(rng, rng.randint(8, 20)) for _ in range(rng.randint(3, 7)))
        chunk = f'<p>{text} <a href="/story/{index}/{paragraph}">more</a></p>'
        parts.append(chunk)
        total += len(chunk)
    parts.append(tail)
    return "".join(parts).encode()


def page_sizes(count: int, seed: int = 7) -> list[int]:
    """A mix skewed to smaller pages, between 20 KB and 500 KB."""
    rng = random.Random(seed)
    return [int(20_000 * (25 ** rng.random())) for _ in range(count)]
