"""``ResearchClient.verify``: a dossier of citations checked by the workers, in batches.

Each batch is one ``verify_citations`` job (``jobs.cite``), whose time is a fetch's; a dossier is
split so no job has more than ``BATCH`` citations, the citations of one URL kept together (the
job folds each text once for all of them), and the batches run at once, on as many workers as
take them. The answer is one object, its citations in the dossier's order.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import orjson

from worker.limits import VERIFY_CITATIONS
from worker.runtime.envelope import parse_report_id
from worker.serialization import JsonObject

BATCH = 100
STATUSES = ("verified", "approximate", "not_found", "not_fetched")
HEAD = ("ok", "tool", "job_id")

# A dossier file larger than this is not a dossier (the jobs take 1,000,000 characters of quotes).
MAX_DOSSIER_BYTES = 16 * 1024 * 1024

Run = Callable[[str, Mapping[str, Any]], Awaitable[JsonObject]]


class _Runs(Protocol):
    async def run(
        self, function: str, kwargs: Mapping[str, Any], *, wait_s: float | None = None
    ) -> JsonObject: ...


class Verifies:
    """``ResearchClient.verify``, given to the client as a base (its module is at its size bound)."""

    async def verify(self: _Runs, report_id: str, citations: Iterable[Mapping[str, Any]]) -> JsonObject:
        """Check a dossier's quotes against what the report fetched (docs/citations.md): the object
        ``research-worker verify`` prints, or the error result of a batch whose job failed."""
        parse_report_id(report_id)
        if isinstance(citations, str | bytes | Mapping):
            raise TypeError("verify takes a list of {url, quote} objects")
        return await verify(self.run, report_id, list(citations))


def batches(citations: Sequence[object]) -> list[list[int]]:
    """Indexes of the citations, a batch at a time: one URL's together, at most BATCH a batch
    (unless one URL alone has more)."""
    by_url: dict[str, list[int]] = {}
    for n, citation in enumerate(citations):
        url = citation.get("url") if isinstance(citation, Mapping) else None
        by_url.setdefault(url if isinstance(url, str) else "", []).append(n)
    out: list[list[int]] = []
    for group in by_url.values():
        for start in range(0, len(group), BATCH):
            piece = group[start : start + BATCH]
            if out and len(out[-1]) + len(piece) <= BATCH:
                out[-1].extend(piece)
            else:
                out.append(list(piece))
    return out or [[]]


async def verify(run: Run, report_id: str, citations: Sequence[object]) -> JsonObject:
    """The contract's verify object; a batch's error result (its job failed) when one failed.

    A job near its deadline answers with the citations it checked (the first ones it was given);
    the rest go out again in new jobs, for as long as each round checks some."""
    checked: list[JsonObject | None] = [None] * len(citations)
    pending = list(range(len(citations)))
    while True:
        plan = [[pending[i] for i in batch] for batch in batches([citations[n] for n in pending])]
        results = await asyncio.gather(
            *(
                run(VERIFY_CITATIONS, {"report_id": report_id, "citations": [citations[n] for n in batch]})
                for batch in plan
            )
        )
        for result in results:
            if not result.get("ok"):
                return result
        left: list[int] = []
        for batch, result in zip(plan, results, strict=True):
            found = result.get("citations")
            if not isinstance(found, list) or not (found or not batch) or len(found) > len(batch):
                raise ValueError("a verify job answered with citations it was not given")
            for n, citation in zip(batch, found, strict=False):
                checked[n] = citation if isinstance(citation, dict) else {"status": "not_found"}
            left.extend(batch[len(found) :])
        if not left:
            break
        pending = left
    done = [c for c in checked if c is not None]
    counts = {status: sum(1 for c in done if c.get("status") == status) for status in STATUSES}
    return {"report_id": report_id, "checked": len(done), **counts, "citations": list(done)}


class DossierError(ValueError):
    """The dossier file cannot be read, or is not a JSON list of {url, quote} objects."""


def read_dossier(path: str) -> list[JsonObject]:
    """The dossier's citations, from a file or ``-`` (stdin); their fields are checked by the jobs."""
    try:
        if path == "-":
            raw = sys.stdin.buffer.read(MAX_DOSSIER_BYTES + 1)
        else:
            with Path(path).open("rb") as file:
                raw = file.read(MAX_DOSSIER_BYTES + 1)
    except OSError as exc:
        raise DossierError(f"FILE: cannot read {path} ({exc.strerror})") from None
    if len(raw) > MAX_DOSSIER_BYTES:
        raise DossierError(f"FILE: larger than {MAX_DOSSIER_BYTES:,} bytes")
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise DossierError(f"FILE: not JSON ({exc})") from None
    if not isinstance(value, list):
        raise DossierError('FILE: must be a JSON list of {"url": ..., "quote": ...} objects')
    for n, item in enumerate(value):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("url"), str)
            or not isinstance(item.get("quote"), str)
        ):
            raise DossierError(f'FILE: citation {n} is not an object with "url" and "quote" strings')
    return value


def verdict(result: JsonObject, say: Callable[[str], None]) -> bool:
    """True when every citation is verified or approximate; else says how many are not."""
    citations = result.get("citations")
    shown = citations if isinstance(citations, list) else []
    failing = sum(1 for c in shown if not (isinstance(c, dict) and c.get("status") in STATUSES[:2]))
    if failing:
        checked = result.get("checked")
        say(f"{failing} of {checked} citations are not on the pages they cite, or were never fetched")
    return failing == 0
