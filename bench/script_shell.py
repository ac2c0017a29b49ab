"""The app-shell detector on the development corpora (articles: none may be a shell) and on the
frameworks' starter shells written in tests/support/app_shells.py (each must be one).

Each page goes through ``build_document`` as fetch_page reads it. The figures: false shells among
the corpora's article pages (target 0), shells detected among the starter templates (target all),
and what the detector costs the reducer (reduction CPU time with and without its hook, on the
corpora; target under 2 %).

Usage: ``python bench/script_shell.py``.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.extraction import DATA, load  # noqa: E402
from jobs.reader.document import build_document  # noqa: E402
from jobs.reader.html import reduce as reducer_module  # noqa: E402
from jobs.reader.script_shell import ShellSignals  # noqa: E402
from tests.support.app_shells import NOT_SHELLS, SHELLS, with_boot  # noqa: E402

CORPORA = ("zyte-dev", "multilingual-dev")


async def shell_of(body: bytes, url: str) -> bool:
    document = await build_document(
        body, "text/html", url, extract="main", max_chars=40_000, cpu_budget_s=3.0, body_truncated=False
    )
    return document.script_shell


def reduce_cpu_s(bodies: list[str]) -> float:
    start = time.process_time()
    for html in bodies:
        reducer_module.reduce_all(html)
    return time.process_time() - start


async def main() -> int:
    if not DATA.is_dir():
        print(f"the corpora are absent ({DATA}); nothing to measure")
        return 0
    texts: list[str] = []
    for corpus in CORPORA:
        pages = load(corpus)
        if pages is None:
            print(f"{corpus}: absent, skipped")
            continue
        false = [page.key for page in pages if await shell_of(page.body, page.url)]
        texts += [page.body.decode("utf-8", "replace") for page in pages]
        print(f"{corpus}: {len(false)} false shells among {len(pages)} article pages (target 0)")
        for key in false[:10]:
            print(f"  false shell: {key}")
    found = [name for name, html in SHELLS.items() if await shell_of(html.encode(), "https://site.test/")]
    booted = [
        n for n, html in SHELLS.items() if await shell_of(with_boot(html).encode(), "https://site.test/")
    ]
    wrong = [name for name, html in NOT_SHELLS.items() if await shell_of(html.encode(), "https://site.test/")]
    missed = sorted(set(SHELLS) - set(found))
    print(f"starter shells detected: {len(found)} of {len(SHELLS)} (target all); missed: {missed}")
    print(f"  with the test app's boot script: {len(booted)} of {len(SHELLS)}")
    print(f"short pages that are not shells, called shells: {len(wrong)} of {len(NOT_SHELLS)} (target 0)")
    if texts:
        with_hook = min(reduce_cpu_s(texts) for _ in range(2))
        original = ShellSignals.start
        ShellSignals.start = lambda self, name, attrs: None  # type: ignore[method-assign]
        try:
            without = min(reduce_cpu_s(texts) for _ in range(2))
        finally:
            ShellSignals.start = original  # type: ignore[method-assign]
        cost = 100 * (with_hook - without) / without
        print(
            f"detector's cost: reduction {with_hook:.2f} s with the hook, {without:.2f} s without, "
            f"{cost:+.1f} % on {len(texts)} pages (target under 2 %)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
