"""``fetch`` and ``search``: a job enqueued through the client, waited for, its result printed."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from worker.cli import common
from worker.cli.common import REACH_S, NoWorker, RedisFull, locate, print_json, reach
from worker.cli.exits import Exit, say
from worker.client import RedisOutOfMemory, ResearchClient
from worker.config import Settings
from worker.limits import FETCH_PAGE, WEB_SEARCH
from worker.serialization import JsonObject
from worker.state import health

T = TypeVar("T")

WAIT_MARGIN_S = 30.0  # a fetch or search waits the job timeout plus this, unless --wait says otherwise


def cmd_fetch(args: argparse.Namespace, settings: Settings) -> int:
    report_id = common.report_id(args.report)
    return asyncio.run(
        _run_job(
            args,
            settings,
            lambda client: client.fetch(
                report_id,
                args.url,
                extract=args.extract,
                fresh=args.fresh,
                offset=args.offset,
                max_chars=args.max_chars,
                find=args.find,
                format=args.format,
                render=args.render,
            ),
            seed=[args.url] if args.seed else [],
            report_id=report_id,
            what=FETCH_PAGE,
        )
    )


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    report_id = common.report_id(args.report)
    return asyncio.run(
        _run_job(
            args,
            settings,
            lambda client: client.search(
                report_id, args.query, max_results=args.max_results, org_id=args.org
            ),
            seed=[],
            report_id=report_id,
            what=WEB_SEARCH,
        )
    )


async def _run_job(
    args: argparse.Namespace,
    settings: Settings,
    job: Callable[[ResearchClient], Awaitable[JsonObject]],
    *,
    seed: list[str],
    report_id: str,
    what: str,
    judged: Callable[[JsonObject], int] | None = None,
) -> int:
    settings, found = locate(settings)
    redis = await reach(found, settings, REACH_S)
    try:
        if not args.enqueue_anyway and not await health.any_alive(redis, settings.queue_name):
            raise NoWorker(settings.queue_name, found.url)
    finally:
        await redis.aclose()
    wait_s = args.wait if args.wait is not None else settings.job_timeout_s + WAIT_MARGIN_S
    try:
        # Whether a worker runs was checked above, with the command line's own message.
        async with ResearchClient(settings=settings, wait_s=wait_s, require_worker=False) as client:
            if seed:
                await client.seed_urls(report_id, seed)
            result = await _showing_progress(job(client), f"the {what} job on {settings.queue_name}")
    except RedisOutOfMemory:
        raise RedisFull(found.url) from None
    print_json(result)
    if judged is not None and "error" not in result:
        return judged(result)  # an answer that is not one job's result (verify)
    if result.get("ok"):
        return Exit.OK
    error = result.get("error")
    error = error if isinstance(error, dict) else {}
    say(f"{result.get('tool')} returned {error.get('kind')}: {error.get('message')}{_hint(error)}")
    return Exit.JOB_ERROR


def _hint(error: Mapping[str, object]) -> str:
    """What to type next, where the command line has the answer."""
    if error.get("kind") == "url_not_in_menu":
        return "; to fetch a URL the report has not seen, pass --seed (it puts the URL on the menu first)"
    return ""


async def _showing_progress(work: Awaitable[T], what: str) -> T:
    """Await ``work``; on a terminal, say on stderr that it is being waited for (nothing otherwise)."""
    if not sys.stderr.isatty():
        return await work
    task = asyncio.ensure_future(work)
    started = time.monotonic()
    try:
        while not task.done():
            waited = time.monotonic() - started
            sys.stderr.write(f"\rwaiting for {what} (Ctrl-C stops waiting) {waited:.0f} s ")
            sys.stderr.flush()
            await asyncio.wait({task}, timeout=0.5)
    finally:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()
        task.cancel()
    return task.result()
