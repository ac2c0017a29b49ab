"""``ResearchClient.verify`` splits a dossier into jobs: at most 100 citations each, one URL's
together (unless it alone has more), every citation in exactly one, answers back in dossier order."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from worker.citations import BATCH, batches, verify
from worker.limits import VERIFY_CITATIONS

DOSSIER = st.lists(
    st.fixed_dictionaries(
        {"url": st.sampled_from([f"https://e.org/{n}" for n in range(8)]), "quote": st.text()}
    ),
    max_size=400,
)


@settings(max_examples=100, deadline=None)
@given(DOSSIER)
def test_batches_cover_the_dossier_once_keep_urls_together_and_stay_small(
    dossier: list[dict[str, str]],
) -> None:
    plan = batches(dossier)
    assert sorted(n for batch in plan for n in batch) == list(range(len(dossier)))
    assert all(len(batch) <= BATCH for batch in plan)
    for url in {c["url"] for c in dossier}:
        holding = [batch for batch in plan if any(dossier[n]["url"] == url for n in batch)]
        count = sum(1 for c in dossier if c["url"] == url)
        assert len(holding) == -(-count // BATCH)  # together, unless one URL alone fills batches


@settings(max_examples=50, deadline=None)
@given(DOSSIER)
def test_the_answer_is_in_dossier_order_with_its_counts(dossier: list[dict[str, str]]) -> None:
    jobs: list[Mapping[str, Any]] = []

    async def run(function: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        assert function == VERIFY_CITATIONS
        jobs.append(kwargs)
        # A stand-in job: "verified" when the quote is non-empty, echoing url and quote.
        found = [{**c, "status": "verified" if c["quote"] else "not_found"} for c in kwargs["citations"]]
        return {"ok": True, "tool": function, "citations": found}

    answer = asyncio.run(verify(run, "r-1", dossier))
    assert [{"url": c["url"], "quote": c["quote"]} for c in answer["citations"]] == dossier
    assert answer["checked"] == len(dossier)
    assert answer["verified"] == sum(1 for c in dossier if c["quote"])
    assert answer["not_found"] == len(dossier) - answer["verified"]
    assert all(job["report_id"] == "r-1" for job in jobs)


def test_a_failed_batch_is_the_answer() -> None:
    async def run(function: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        return {"ok": False, "tool": function, "error": {"kind": "timeout", "message": "late"}}

    answer = asyncio.run(verify(run, "r-1", [{"url": "https://e.org/", "quote": "q"}]))
    assert answer["error"]["kind"] == "timeout"


@settings(max_examples=50, deadline=None)
@given(DOSSIER, st.integers(1, 7))
def test_citations_a_job_left_unchecked_go_out_again_until_all_are(
    dossier: list[dict[str, str]], per_job: int
) -> None:
    rounds: list[int] = []

    async def run(function: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        # A job short of time: it checks its first few citations and says how many it left.
        given = kwargs["citations"]
        rounds.append(len(given))
        found = [{**c, "status": "approximate"} for c in given[:per_job]]
        return {"ok": True, "tool": function, "citations": found, "unchecked": len(given) - len(found)}

    answer = asyncio.run(verify(run, "r-1", dossier))
    assert [{"url": c["url"], "quote": c["quote"]} for c in answer["citations"]] == dossier
    assert answer["approximate"] == answer["checked"] == len(dossier)
    assert sum(min(n, per_job) for n in rounds) == len(dossier)  # each citation checked once
