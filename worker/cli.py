"""The ``research-worker`` command line (docs/contract.md lists each command and its exit codes)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import ipaddress
import logging
import socket
import sys
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from redis.exceptions import RedisError

from worker import keys, logs
from worker.budget import Budgets
from worker.client import ResearchClient
from worker.config import ConfigError, Settings, default_worker_id, redact_url
from worker.embedded import EmbeddedRedis, redis_answers
from worker.envelope import parse_report_id
from worker.errors import MissingReportId
from worker.logs import fields
from worker.menu import Menu
from worker.redis_conn import connect
from worker.spend import report_spend

log = logging.getLogger("research.cli")

EXIT_OK = 0
EXIT_NOT_OK = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3


def print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value).decode() + "\n")
    sys.stdout.flush()


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    from worker.settings import build_worker

    embedded: EmbeddedRedis | None = None
    if settings.redis_url is None and not redis_answers():
        embedded = EmbeddedRedis()
        embedded.start()
        settings = dataclasses.replace(settings, redis_url=embedded.url)
        log.info(
            "no REDIS_URL set and nothing answers on localhost:6379: started an embedded Redis",
            extra=fields(redis_url=embedded.url),
        )
    try:
        log.info("connecting to redis", extra=fields(redis_url=redact_url(settings.redis_target.url)))
        build_worker(settings, burst=args.burst).run()
    finally:
        if embedded is not None:
            embedded.stop()
            log.info("stopped the embedded Redis")
    return EXIT_OK


def cmd_tools(args: argparse.Namespace, settings: Settings) -> int:
    from worker.settings import tool_definitions

    print_json(tool_definitions(settings))
    return EXIT_OK


def cmd_budget(args: argparse.Namespace, settings: Settings) -> int:
    try:
        report_id = parse_report_id(args.report_id)
    except MissingReportId as exc:
        print_json({"error": {"kind": exc.kind, "message": exc.message}})
        return EXIT_USAGE
    return asyncio.run(_budget(settings, report_id))


async def _budget(settings: Settings, report_id: str) -> int:
    redis = await connect(settings)
    try:
        usage, ttl = await Budgets(redis, settings).usage(report_id)
        print_json(
            {
                "report_id": report_id,
                **{
                    tool.value: {"used": u.used, "limit": u.limit, "remaining": u.remaining}
                    for tool, u in usage.items()
                },
                "window_s": settings.budget_window_s,
                "expires_in_s": ttl if ttl >= 0 else None,
                "menu_size": await Menu(redis, settings).size(report_id),
                "spend": await report_spend(redis, report_id),
            }
        )
    finally:
        await redis.aclose()
    return EXIT_OK


def cmd_fetch(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_fetch(args, settings))


async def _fetch(args: argparse.Namespace, settings: Settings) -> int:
    async with ResearchClient(settings=settings, wait_s=_wait_s(args, settings)) as client:
        if args.seed:
            await client.seed_urls(args.report, [args.url])
        result = await client.fetch(args.report, args.url, extract=args.extract)
    print_json(result)
    return EXIT_OK if result.get("ok") else EXIT_NOT_OK


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_search(args, settings))


async def _search(args: argparse.Namespace, settings: Settings) -> int:
    async with ResearchClient(settings=settings, wait_s=_wait_s(args, settings)) as client:
        result = await client.search(args.report, args.query, max_results=args.max_results, org_id=args.org)
    print_json(result)
    return EXIT_OK if result.get("ok") else EXIT_NOT_OK


def _wait_s(args: argparse.Namespace, settings: Settings) -> float:
    return float(args.wait) if args.wait is not None else settings.job_timeout_s + 30.0


def cmd_check_url(args: argparse.Namespace, settings: Settings) -> int:
    from worker.guardian.decide import decide
    from worker.guardian.policy import AddressPolicy

    try:
        addresses = [ipaddress.ip_address(a) for a in args.resolves_to]
    except ValueError as exc:
        sys.stderr.write(f"research-worker: --resolves-to: {exc}\n")
        return EXIT_USAGE
    verdict = asyncio.run(decide(args.url, AddressPolicy(settings.guardian_allow_cidrs), addresses))
    print_json(verdict)
    return EXIT_OK if verdict["verdict"] == "allow" else EXIT_REFUSED


def cmd_health(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_health(settings))


async def _health(settings: Settings) -> int:
    """Exit 0 when this replica's health key is fresh (Docker HEALTHCHECK, k8s liveness)."""
    redis = await connect(settings)
    try:
        if settings.worker_id != default_worker_id():
            alive = bool(await redis.exists(keys.health(settings.queue_name, settings.worker_id)))
        else:
            # The probe runs in its own process, so it cannot know the worker's pid: any replica
            # of this host (a container's hostname is its own) counts.
            pattern = keys.health(settings.queue_name, f"{socket.gethostname()}-*")
            alive = any([k async for k in redis.scan_iter(match=pattern, count=100)])
    finally:
        await redis.aclose()
    return EXIT_OK if alive else EXIT_NOT_OK


def cmd_dashboard(args: argparse.Namespace, settings: Settings) -> int:
    from worker.dashboard import serve

    return serve(settings, args.host, args.port)


Command = Callable[[argparse.Namespace, Settings], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="research-worker",
        description="Safe, bounded web access for a research agent (arq worker and tools).",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a worker")
    run.add_argument("--burst", action="store_true", help="exit once the queue is empty")
    run.set_defaults(handler=cmd_run)

    budget = sub.add_parser("budget", help="print a report's budget counters as JSON")
    budget.add_argument("report_id", metavar="ID")
    budget.set_defaults(handler=cmd_budget)

    fetch = sub.add_parser("fetch", help="enqueue a fetch, wait, print the result JSON")
    fetch.add_argument("url", metavar="URL")
    fetch.add_argument("--report", required=True, metavar="ID")
    fetch.add_argument("--extract", choices=("main", "full"), default="main")
    fetch.add_argument("--seed", action="store_true", help="first put the URL on the report's menu")
    fetch.add_argument("--wait", type=float, default=None, metavar="S", help="seconds to wait")
    fetch.set_defaults(handler=cmd_fetch)

    search = sub.add_parser("search", help="enqueue a search, wait, print the result JSON")
    search.add_argument("query", metavar="QUERY")
    search.add_argument("--report", required=True, metavar="ID")
    search.add_argument("--max-results", type=int, default=5, metavar="N")
    search.add_argument("--org", default=None, metavar="ID", help="the organization to bill")
    search.add_argument("--wait", type=float, default=None, metavar="S", help="seconds to wait")
    search.set_defaults(handler=cmd_search)

    check = sub.add_parser("check-url", help="print the guardian's verdict on a URL; never connects")
    check.add_argument("url", metavar="URL")
    check.add_argument(
        "--resolves-to",
        action="append",
        default=[],
        metavar="IP",
        help="judge these addresses instead of asking DNS (repeatable)",
    )
    check.set_defaults(handler=cmd_check_url)

    health = sub.add_parser("health", help="exit 0 when this replica's health key is fresh")
    health.set_defaults(handler=cmd_health)

    tools = sub.add_parser("tools", help="print the tool definitions for the orchestrator's model")
    tools.set_defaults(handler=cmd_tools)

    dashboard = sub.add_parser("dashboard", help="serve the read-only monitoring page")
    dashboard.add_argument("--host", default="127.0.0.1")
    dashboard.add_argument("--port", type=int, default=8300)
    dashboard.set_defaults(handler=cmd_dashboard)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        sys.stderr.write(f"research-worker: configuration error: {exc}\n")
        return EXIT_USAGE
    logs.configure(settings.log_level)
    handler: Command = args.handler
    try:
        return handler(args, settings)
    except ConfigError as exc:
        sys.stderr.write(f"research-worker: configuration error: {exc}\n")
        return EXIT_USAGE
    except (RedisError, OSError) as exc:
        where = redact_url(settings.redis_target.url)
        sys.stderr.write(f"research-worker: cannot reach Redis at {where}: {type(exc).__name__}: {exc}\n")
        return EXIT_NOT_OK
    except KeyboardInterrupt:
        return EXIT_NOT_OK


if __name__ == "__main__":
    raise SystemExit(main())
