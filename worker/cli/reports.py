"""``budget`` and ``archive``: what a report (or an organization today) has used, and the evidence its
results cite."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

from worker.archive import index, journal
from worker.archive.export import Missing, export
from worker.archive.service import open_store
from worker.archive.store import StoreFailed
from worker.cli import common
from worker.cli.common import REACH_S, locate, print_json, reach
from worker.cli.exits import Exit, UsageError, say
from worker.config import Settings
from worker.state.budget import Budgets, OcrBudget, ReadBudget, org_today
from worker.state.menu import Menu
from worker.state.spend import report_spend


def cmd_budget(args: argparse.Namespace, settings: Settings) -> int:
    if args.org is not None:
        if args.report_id is not None:
            raise UsageError("give a report ID or --org ORG, not both")
        return asyncio.run(_org_budget(settings, common.report_id(args.org, "ORG")))
    if args.report_id is None:
        raise UsageError("give a report ID, or --org ORG for an organization's day")
    return asyncio.run(_budget(settings, common.report_id(args.report_id, "ID")))


async def _org_budget(settings: Settings, org_id: str) -> int:
    """An organization's counters for today (``RESEARCH_ORG_DAILY_*``)."""
    settings, found = locate(settings)
    redis = await reach(found, settings, REACH_S)
    try:
        print_json(await org_today(redis, settings, org_id))
    finally:
        await redis.aclose()
    return Exit.OK


async def _budget(settings: Settings, report_id: str) -> int:
    settings, found = locate(settings)
    redis = await reach(found, settings, REACH_S)
    try:
        usage, ttl = await Budgets(redis, settings).usage(report_id)
        reads = ReadBudget(redis, limit=settings.read_budget_chars, window_s=settings.budget_window_s)
        read = await reads.used(report_id)
        ocr = OcrBudget(redis, limit=settings.ocr_budget_pages, window_s=settings.budget_window_s)
        ocr_used = await ocr.used(report_id)
        print_json(
            {
                "report_id": report_id,
                **{
                    tool.value: {"used": u.used, "limit": u.limit, "remaining": u.remaining}
                    for tool, u in usage.items()
                },
                "read_chars": {"used": read, "limit": reads.limit, "remaining": max(0, reads.limit - read)},
                "ocr_pages": {
                    "used": ocr_used,
                    "limit": ocr.limit,
                    "remaining": max(0, ocr.limit - ocr_used),
                },
                "window_s": settings.budget_window_s,
                "expires_in_s": ttl if ttl >= 0 else None,
                "menu_size": await Menu(redis, settings).size(report_id),
                "spend": await report_spend(redis, report_id),
            }
        )
    finally:
        await redis.aclose()
    return Exit.OK


def cmd_archive(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_archive(settings, common.report_id(args.report_id, "REPORT"), args.output))


async def _archive(settings: Settings, report_id: str, output: str) -> int:
    store = open_store(settings.archive, settings.archive_endpoint)
    if store is None:
        raise UsageError("the evidence archive is off (RESEARCH_ARCHIVE=off): there is nothing to export")
    settings, found = locate(settings)
    redis = await reach(found, settings, REACH_S)
    try:
        cited = await index.cited(redis, report_id)
        lost = await journal.lost_records(redis, settings.queue_name, report_id)
    finally:
        await redis.aclose()
    if not cited:
        say(f"report {report_id} cites no archived record (or its budget window has ended)")
        return Exit.JOB_ERROR
    gone: list[str] = []
    sink = sys.stdout.buffer if output == "-" else None
    try:
        # A command of its own process: nothing else waits on this loop while it writes.
        with open(output, "wb") if sink is None else contextlib.nullcontext(sink) as out:  # noqa: ASYNC230
            async for chunk in export(store, report_id, cited, missing=gone.append):
                out.write(chunk)
            out.flush()
    except OSError as exc:
        raise UsageError(f"-o: cannot write {output} ({exc.strerror})") from None
    except (Missing, StoreFailed) as exc:
        say(f"the archive could not be read at {store.where} ({exc})")
        return Exit.JOB_ERROR
    finally:
        await store.close()
    if gone:
        say(journal.explain_missing(gone, len(cited), lost, store.where))
    return Exit.JOB_ERROR if len(gone) == len(cited) else Exit.OK
