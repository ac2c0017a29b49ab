"""The ``research-worker`` command line.

Every command that needs Redis finds it as the others do (``REDIS_URL``, else the embedded Redis a
``run`` started, else the default address; ``worker.embedded``), tries for about two seconds, and
otherwise prints one line naming the URL it tried and how to start one. ``fetch`` and ``search``
first check that a worker is alive on the queue, so a job nobody will run is not left to time
out. Exit codes mean one thing each (``Exit``); ``--help`` lists them and the variables that matter.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import os
import re
import socket
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from enum import IntEnum
from importlib import metadata
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
from arq.connections import ArqRedis
from redis.exceptions import AuthenticationError, InvalidResponse, RedisError

from worker import embedded, logs
from worker.config import ConfigError, Settings, default_worker_id, redact_url
from worker.embedded import Located, Origin
from worker.errors import MissingReportId
from worker.limits import DEFAULT_EXTRACT, DEFAULT_MAX_RESULTS, EXTRACT_MODES, MAX_RESULTS
from worker.logs import fields
from worker.redact import redact_urls
from worker.runtime.envelope import parse_report_id
from worker.serialization import JsonObject
from worker.settings import FETCH_PAGE, WEB_SEARCH
from worker.state import health, keys
from worker.state.memory import is_out_of_memory
from worker.state.redis_conn import connect

if TYPE_CHECKING:
    from worker.client import ResearchClient

log = logging.getLogger("research.cli")

T = TypeVar("T")

REACH_S = 2.0  # how long a command tries to reach Redis before it says it cannot
HEALTH_REACH_S = 0.4  # a container probe answers within about a second, start-up included
RETRY_PAUSE_S = 0.2
WAIT_MARGIN_S = 30.0  # a fetch or search waits the job timeout plus this, unless --wait says otherwise


class Exit(IntEnum):
    """What the process's exit code means: one thing each."""

    OK = 0
    JOB_ERROR = 1  # the job ran and returned an error result
    USAGE = 2  # usage or configuration error (argparse uses 2 as well)
    REFUSED = 3  # check-url: the guardian refuses the URL
    REDIS_UNREACHABLE = 4
    NO_WORKER = 5
    REDIS_OUT_OF_MEMORY = 6
    INTERRUPTED = 130


EXIT_CODES = """exit codes:
  0    success
  1    the job ran and returned an error result (its kind is printed on stderr)
  2    usage or configuration error
  3    refused by the guardian (check-url); a fetch the guardian or the URL menu refuses is a
       job error result (1) naming scheme_not_allowed, destination_blocked or url_not_in_menu
  4    Redis unreachable (after trying for about 2 s; health: about 0.4 s)
  5    no worker alive on the queue (fetch, search; health: this replica is not beating)
  6    Redis is out of memory: it refused a write (maxmemory with noeviction); nothing was queued
  130  interrupted (Ctrl-C)"""

ENVIRONMENT = """environment (every variable: docs/contract.md):
  REDIS_URL                      where Redis is; unset: the embedded Redis a `run` started on
                                 this machine, else redis://127.0.0.1:6379/0
  RESEARCH_QUEUE                 the queue (default research:queue)
  OPENROUTER_API_KEY             the key web_search uses
  RESEARCH_GUARDIAN_ALLOW_CIDRS  ranges fetched despite the guardian, e.g. 127.0.0.1/32
  RESEARCH_CA_BUNDLE             an extra CA file trusted for fetches
  RESEARCH_URL_MENU              on (default): a report fetches only URLs it has seen
  RESEARCH_LOG_FORMAT            text or json (default: text on a terminal, json otherwise)
  RESEARCH_LOG_LEVEL             DEBUG, INFO (default), WARNING or ERROR"""


class RedisUnreachable(Exception):
    def __init__(self, found: Located, reason: str) -> None:
        super().__init__(reason)
        self.found = found
        self.reason = reason

    def line(self) -> str:
        where = redact_url(self.found.url)
        if self.found.source is Origin.REDIS_URL:
            advice = "start that Redis, or point REDIS_URL at one that runs"
        else:
            advice = (
                "start a worker with `research-worker run` (it brings its own Redis when none runs), "
                "or set REDIS_URL"
            )
        return f"cannot reach Redis at {where} ({self.reason}); {advice}"


class NoWorker(Exception):
    def __init__(self, queue_name: str, url: str) -> None:
        super().__init__(queue_name)
        self.queue_name = queue_name
        self.url = url

    def line(self) -> str:
        return (
            f"no worker is running on queue {self.queue_name} at {redact_url(self.url)}; start one with "
            "`research-worker run`, or pass --enqueue-anyway to queue the job for a worker that starts later"
        )


class RedisFull(Exception):
    """Redis refused a write for memory: reachable, but full."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url

    def line(self) -> str:
        return (
            f"Redis is out of memory at {redact_url(self.url)}: it refused a write (maxmemory reached, "
            "noeviction); nothing was queued. Free memory in Redis or raise its maxmemory "
            "(docs/operations.md)"
        )


def print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value).decode() + "\n")
    sys.stdout.flush()


def say(line: str) -> None:
    sys.stderr.write(f"research-worker: {redact_urls(line)}\n")
    sys.stderr.flush()


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    with embedded.redis_for_worker(settings.redis_url, settings.runtime_dir) as found:
        settings = dataclasses.replace(settings, redis_url=found.url)
        asyncio.run(_joining(found, settings))  # unreachable: its own one line, exit 4
        # Which Redis, and why, before anything else: every command on the machine may pick a
        # different one (REDIS_URL, an embedded one, whatever answers at the default address).
        shown = redact_url(found.url)
        log.info(
            f"using Redis at {shown} ({found.why()})",
            extra=fields(redis_url=shown, found=found.source.value, queue=settings.queue_name),
        )
        from worker.settings import build_worker  # the tools take a while to import: not before Redis

        build_worker(settings, burst=args.burst, render=args.render).run()
    return Exit.OK


async def _close(pool: Awaitable[ArqRedis]) -> None:
    await (await pool).aclose()


async def _joining(found: Located, settings: Settings) -> None:
    """Reach Redis, and warn when the queue's workers run with settings that change results."""
    from worker.runtime.fingerprint import others_differ

    redis = await reach(found, settings, REACH_S)
    try:
        differ = await others_differ(redis, settings)
    except (RedisError, OSError) as exc:
        log.debug(
            "could not compare settings with the queue's workers", extra=fields(error=type(exc).__name__)
        )
        differ = {}
    finally:
        await redis.aclose()
    for worker_id, names in sorted(differ.items()):
        # Names only: the values may be operators' (ranges, paths) and the point is which to align.
        log.warning(
            f"worker {worker_id} on queue {settings.queue_name} runs with other settings that change "
            f"results: {', '.join(names)}; jobs go to either worker at random, so align them or use "
            "another RESEARCH_QUEUE",
            extra=fields(other_worker=worker_id, differing=names, queue=settings.queue_name),
        )


def cmd_fetch(args: argparse.Namespace, settings: Settings) -> int:
    report_id = _report_id(args.report)
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
    report_id = _report_id(args.report)
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
) -> int:
    from worker.client import ResearchClient

    settings, found = _locate(settings)
    redis = await reach(found, settings, REACH_S)
    try:
        if not args.enqueue_anyway and not await health.any_alive(redis, settings.queue_name):
            raise NoWorker(settings.queue_name, found.url)
    finally:
        await redis.aclose()
    from worker.client import RedisOutOfMemory

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
    if result.get("ok"):
        return Exit.OK
    error = result.get("error")
    error = error if isinstance(error, dict) else {}
    say(f"{result.get('tool')} returned {error.get('kind')}: {error.get('message')}")
    return Exit.JOB_ERROR


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


def cmd_budget(args: argparse.Namespace, settings: Settings) -> int:
    if args.org is not None:
        if args.report_id is not None:
            raise UsageError("give a report ID or --org ORG, not both")
        return asyncio.run(_org_budget(settings, _report_id(args.org, "ORG")))
    if args.report_id is None:
        raise UsageError("give a report ID, or --org ORG for an organization's day")
    return asyncio.run(_budget(settings, _report_id(args.report_id, "ID")))


async def _org_budget(settings: Settings, org_id: str) -> int:
    from worker.state.budget import org_today

    settings, found = _locate(settings)
    redis = await reach(found, settings, REACH_S)
    try:
        print_json(await org_today(redis, settings, org_id))
    finally:
        await redis.aclose()
    return Exit.OK


async def _budget(settings: Settings, report_id: str) -> int:
    from worker.state.budget import Budgets, ReadBudget
    from worker.state.menu import Menu
    from worker.state.spend import report_spend

    settings, found = _locate(settings)
    redis = await reach(found, settings, REACH_S)
    try:
        usage, ttl = await Budgets(redis, settings).usage(report_id)
        reads = ReadBudget(redis, limit=settings.read_budget_chars, window_s=settings.budget_window_s)
        read = await reads.used(report_id)
        print_json(
            {
                "report_id": report_id,
                **{
                    tool.value: {"used": u.used, "limit": u.limit, "remaining": u.remaining}
                    for tool, u in usage.items()
                },
                "read_chars": {"used": read, "limit": reads.limit, "remaining": max(0, reads.limit - read)},
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
    return asyncio.run(_archive(settings, _report_id(args.report_id, "REPORT"), args.output))


async def _archive(settings: Settings, report_id: str, output: str) -> int:
    from worker.archive import index
    from worker.archive.export import Missing, export
    from worker.archive.service import open_store
    from worker.archive.store import StoreFailed

    store = open_store(settings.archive, settings.archive_endpoint)
    if store is None:
        raise UsageError("the evidence archive is off (RESEARCH_ARCHIVE=off): there is nothing to export")
    settings, found = _locate(settings)
    redis = await reach(found, settings, REACH_S)
    try:
        cited = await index.cited(redis, report_id)
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
        say(
            f"{len(gone)} of {len(cited)} cited records could not be read from {store.where} (deleted "
            "by retention, or the store is unreachable); the file holds the others"
        )
    return Exit.JOB_ERROR if len(gone) == len(cited) else Exit.OK


def cmd_check_url(args: argparse.Namespace, settings: Settings) -> int:
    from worker.guardian.decide import decide
    from worker.guardian.policy import AddressPolicy

    try:
        addresses = [ipaddress.ip_address(a) for a in args.resolves_to]
    except ValueError as exc:
        say(f"--resolves-to: {exc}")
        return Exit.USAGE
    from worker.state.report_domains import deployment_policy

    policy = AddressPolicy(settings.guardian_allow_cidrs)
    verdict = asyncio.run(decide(args.url, policy, addresses, domains=deployment_policy(settings)))
    print_json(verdict)
    return Exit.OK if verdict["verdict"] == "allow" else Exit.REFUSED


def cmd_health(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_health(settings))


async def _health(settings: Settings) -> int:
    """Exit 0 when this replica's health key is fresh (Docker HEALTHCHECK, k8s liveness)."""
    settings, found = _locate(settings)
    redis = await reach(found, settings, HEALTH_REACH_S)
    try:
        if settings.worker_id != default_worker_id():
            alive = bool(await redis.exists(keys.health(settings.queue_name, settings.worker_id)))
        else:
            # The probe runs in its own process, so it cannot know the worker's pid: any replica
            # of this host (a container's hostname is its own) counts.
            mine = f"{socket.gethostname()}-"
            replicas = await health.replicas(redis, settings.queue_name)
            alive = any(replica.worker_id.startswith(mine) for replica in replicas)
    finally:
        await redis.aclose()
    return Exit.OK if alive else Exit.NO_WORKER


def cmd_tools(args: argparse.Namespace, settings: Settings) -> int:
    from worker.settings import ToolFormat, formatted

    print_json(formatted(settings, ToolFormat(args.format)))
    return Exit.OK


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the tools over MCP; each call is a job on the queue, so a worker must run somewhere."""
    if args.http and args.report is not None:
        raise UsageError("--report is for stdio; over HTTP each MCP session is a report of its own")
    if args.http:
        from worker.mcp.tokens import load_tokens

        tokens = load_tokens(settings.mcp_tokens_file)  # a bad file stops here, before Redis
    report_id = _report_id(args.report) if args.report is not None else f"mcp-{uuid.uuid4().hex}"
    settings, found = _locate(settings)
    asyncio.run(_no_worker_warning(reach(found, settings, REACH_S), settings))
    from worker.mcp.serve import CannotListen, serve_http, serve_stdio  # the SDK takes a while to import
    from worker.settings import ToolFormat, formatted

    listing = formatted(settings, ToolFormat.MCP)["tools"]  # exactly what `tools --format mcp` prints
    if args.http:
        try:
            asyncio.run(serve_http(settings, listing, tokens, args.host, args.port, version()))
        except CannotListen as exc:
            say(str(exc))
            return Exit.JOB_ERROR  # as the dashboard does
    else:
        if args.report is None:
            say(f"this MCP session's report id is {report_id}")
        asyncio.run(serve_stdio(settings, listing, report_id, version()))
    return Exit.OK


async def _no_worker_warning(pool: Awaitable[ArqRedis], settings: Settings) -> None:
    """Say so on stderr when no worker runs yet: calls wait for one (an MCP host starts us early)."""
    redis = await pool
    try:
        if not await health.any_alive(redis, settings.queue_name):
            say(f"no worker is running on queue {settings.queue_name} yet; calls wait for one to start")
    finally:
        await redis.aclose()


def cmd_dashboard(args: argparse.Namespace, settings: Settings) -> int:
    settings, found = _locate(settings)
    try:
        asyncio.run(_close(reach(found, settings, REACH_S)))
    except RedisUnreachable as exc:
        # A dashboard is for watching outages too: it serves, its pages answer 503 saying why
        # until Redis is back, and its own /healthz stays 200. Wrong credentials still stop it.
        say(f"{exc.line()}; serving anyway, the pages answer 503 until Redis is back")
    from worker.dashboard import serve  # templates and all: after the first try for Redis

    return serve(settings, args.host, args.port)


async def reach(found: Located, settings: Settings, within_s: float) -> ArqRedis:
    """An open connection to the Redis ``found``, trying for ``within_s``; ``RedisUnreachable`` after that.

    ``settings`` must already point at it (``_locate``).
    """
    deadline = time.monotonic() + within_s
    while True:
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), RETRY_PAUSE_S)):
                return await connect(settings, fail_fast=True)
        except AuthenticationError:
            source = "REDIS_URL" if found.source is Origin.REDIS_URL else "Redis"
            raise ConfigError(f"{source}: Redis at {redact_url(found.url)} refused the credentials") from None
        except (RedisError, OSError, TimeoutError) as exc:
            if time.monotonic() + RETRY_PAUSE_S >= deadline:
                raise RedisUnreachable(found, _why(exc)) from None
            await asyncio.sleep(RETRY_PAUSE_S)


ERRNO = re.compile(r"^Error (-?\d+) ")


def _why(exc: BaseException) -> str:
    """Why a connection failed, in our words (the system's name for an errno at most)."""
    if isinstance(exc, TimeoutError) or "timeout" in str(exc).lower():
        return "no answer in time"
    if isinstance(exc, InvalidResponse):
        return "what answers there does not speak Redis"
    match = ERRNO.match(str(exc))
    if match is not None:
        number = int(match.group(1))
        return "the host does not resolve" if number < 0 else os.strerror(number).lower()
    return type(exc).__name__


def _locate(settings: Settings) -> tuple[Settings, Located]:
    """Where Redis is, as every command finds it, and the settings pointing there."""
    found = embedded.locate(settings.redis_url, settings.runtime_dir)
    return dataclasses.replace(settings, redis_url=found.url), found


def _report_id(value: str, argument: str = "--report") -> str:
    try:
        return parse_report_id(value)
    except MissingReportId as exc:
        raise UsageError(f"{argument}: {exc.message}") from None


class UsageError(Exception):
    pass


Command = Callable[[argparse.Namespace, Settings], int]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Examples and tables as written, and every option's default after its help."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.required or not action.option_strings or "default" in text:
            return text
        if action.default is False:
            return f"{text} (default: off)"
        if action.default is None or action.default is argparse.SUPPRESS:
            return text
        return f"{text} (default: %(default)s)"


def version() -> str:
    try:
        return metadata.version("research-worker")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="research-worker",
        description=(
            "Safe, bounded web access for a research agent: an arq worker with two tools, web_search "
            "and fetch_page, and the commands to run it, call it and watch it."
        ),
        epilog=f"{EXIT_CODES}\n\n{ENVIRONMENT}",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"research-worker {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, examples: str, handler: Command) -> argparse.ArgumentParser:
        child = sub.add_parser(
            name,
            help=summary,
            description=summary,
            epilog=f"examples:\n{examples}\n\nexit codes: see `research-worker --help`",
            formatter_class=HelpFormatter,
        )
        child.set_defaults(handler=handler)
        return child

    run = command(
        "run",
        "run a worker (with its own embedded Redis when REDIS_URL is unset and none answers)",
        "  REDIS_URL=redis://redis:6379/0 research-worker run --burst\n  research-worker run --render",
        cmd_run,
    )
    run.add_argument("--burst", action="store_true", help="exit once the queue is empty")
    run.add_argument(
        "--render",
        action="store_true",
        help="run a render worker: headless Chromium for fetch_page's render (docs/render.md)",
    )

    fetch = command(
        "fetch",
        "enqueue a fetch_page job, wait, and print its result JSON on stdout",
        "  research-worker fetch https://example.org/ --report r-1 --seed\n"
        '  research-worker fetch https://example.org/paper.pdf --report r-1 --find "going concern"',
        cmd_fetch,
    )
    fetch.add_argument("url", metavar="URL", help="the https URL to fetch")
    fetch.add_argument("--report", required=True, metavar="ID", help="the report the fetch is for (required)")
    fetch.add_argument(
        "--extract",
        choices=EXTRACT_MODES,
        default=DEFAULT_EXTRACT,
        help="the main content, or all readable text",
    )
    fetch.add_argument(
        "--seed", action="store_true", help="first put the URL on the report's menu, as a briefing would"
    )
    fetch.add_argument("--fresh", action="store_true", help="skip the shared page cache")
    fetch.add_argument(
        "--format",
        choices=("markdown", "text"),
        default="markdown",
        help="the text as Markdown (headings, lists, tables, links; the default) or as plain text",
    )
    fetch.add_argument(
        "--offset",
        type=int,
        metavar="N",
        help="start at this character of the whole text, such as a result's next_offset (default: 0)",
    )
    fetch.add_argument(
        "--max-chars",
        type=int,
        metavar="N",
        help="return at most N characters of text (default: RESEARCH_FETCH_MAX_CHARS, 40,000)",
    )
    fetch.add_argument(
        "--find",
        metavar="TEXT",
        help="return the passages of the whole document that contain TEXT (default: read the text)",
    )
    fetch.add_argument(
        "--render",
        action="store_true",
        help="read the page in a render worker's browser (RESEARCH_RENDER on)",
    )
    _waiting_options(fetch)

    search = command(
        "search",
        "enqueue a web_search job, wait, and print its result JSON on stdout",
        '  research-worker search "tidal energy output 2024" --report r-1\n'
        '  research-worker search "tidal energy" --report r-1 --max-results 10 --org acme',
        cmd_search,
    )
    search.add_argument("query", metavar="QUERY", help="what to search for")
    search.add_argument(
        "--report", required=True, metavar="ID", help="the report the search is for (required)"
    )
    search.add_argument(
        "--max-results",
        type=int,
        default=DEFAULT_MAX_RESULTS,
        metavar="N",
        help=f"cited sources wanted, 0-{MAX_RESULTS}",
    )
    search.add_argument(
        "--org",
        default=None,
        metavar="ID",
        help="the organization whose key pays (RESEARCH_ORG_KEYS_FILE; default: OPENROUTER_API_KEY)",
    )
    _waiting_options(search)

    check = command(
        "check-url",
        "print the guardian's verdict on a URL as one JSON line; never connects",
        "  research-worker check-url https://169.254.169.254/latest/meta-data/\n"
        "  research-worker check-url https://example.org/ --resolves-to 10.0.0.5",
        cmd_check_url,
    )
    check.add_argument("url", metavar="URL", help="the URL to judge")
    check.add_argument(
        "--resolves-to",
        action="append",
        default=[],
        metavar="IP",
        help="judge these addresses instead of asking DNS (repeatable; default: ask DNS)",
    )

    budget = command(
        "budget",
        "print a report's budget counters, menu size and spend as JSON",
        "  research-worker budget r-1\n  research-worker budget --org acme",
        cmd_budget,
    )
    budget.add_argument("report_id", metavar="ID", nargs="?", help="the report")
    budget.add_argument(
        "--org",
        metavar="ORG",
        help="an organization's counters for today (UTC), in place of a report's (default: none)",
    )

    archive = command(
        "archive",
        "write one gzipped WARC file with every archived record a report's results cite",
        "  research-worker archive r-1 -o r-1.warc.gz\n  research-worker archive r-1 -o -",
        cmd_archive,
    )
    archive.add_argument("report_id", metavar="REPORT", help="the report")
    archive.add_argument(
        "-o", "--output", default="-", metavar="FILE", help="where to write the file; - for stdout"
    )

    tools = command(
        "tools",
        "print the tool definitions for the orchestrator's model, in an agent framework's format",
        "  research-worker tools\n  research-worker tools --format openai-responses",
        cmd_tools,
    )
    tools.add_argument(
        "--format",
        choices=("anthropic", "openai", "openai-responses", "mcp"),
        default="anthropic",
        help=(
            "Anthropic's input_schema, OpenAI's Chat Completions function calling, OpenAI's Responses "
            "API function tools, or an MCP tools/list result"
        ),
    )

    mcp = command(
        "mcp",
        "serve web_search and fetch_page over MCP, stdio or streamable HTTP (docs/mcp.md)",
        "  research-worker mcp --report r-1\n"
        "  RESEARCH_MCP_TOKENS_FILE=/etc/research/mcp-tokens.json research-worker mcp --http",
        cmd_mcp,
    )
    mcp.add_argument(
        "--report",
        default=None,
        metavar="ID",
        help="stdio: the report every call counts against (default: a new id, printed on stderr)",
    )
    mcp.add_argument(
        "--http",
        action="store_true",
        help="serve streamable HTTP at /mcp (tokens: RESEARCH_MCP_TOKENS_FILE; a report per session)",
    )
    mcp.add_argument("--host", default="127.0.0.1", help="--http: the address to listen on")
    mcp.add_argument("--port", type=int, default=8301, help="--http: the port to listen on")

    dashboard = command(
        "dashboard",
        "serve the read-only monitoring page",
        "  research-worker dashboard\n"
        "  RESEARCH_DASHBOARD_AUTH=ops:secret research-worker dashboard --host 0.0.0.0",
        cmd_dashboard,
    )
    dashboard.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    dashboard.add_argument(
        "--port",
        type=_port,
        default=8300,
        metavar="PORT",
        help="the port to listen on, 1-65535 (0: any free port)",
    )

    command(
        "health",
        "exit 0 while this replica's health key is fresh (container probes), 5 when it is not",
        "  research-worker health\n  RESEARCH_WORKER_ID=worker-0 research-worker health",
        cmd_health,
    )
    return parser


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def _port(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a port in 1..65535 (or 0 for any free port)")
    return value


def _waiting_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait",
        type=_seconds,
        default=None,
        metavar="S",
        help="seconds to wait for the result (default: the job timeout plus 30 s)",
    )
    parser.add_argument(
        "--enqueue-anyway",
        action="store_true",
        help="enqueue even when no worker is alive on the queue (one may start later)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        say(f"configuration error: {exc}")
        return Exit.USAGE
    logs.configure(settings.log_level, settings.log_format)
    handler: Command = args.handler
    try:
        return int(handler(args, settings))
    except UsageError as exc:
        say(str(exc))
        return Exit.USAGE
    except ConfigError as exc:
        say(f"configuration error: {exc}")
        return Exit.USAGE
    except RedisUnreachable as exc:
        say(exc.line())
        return Exit.REDIS_UNREACHABLE
    except embedded.EmbeddedUnavailable as exc:
        say(str(exc))
        return Exit.REDIS_UNREACHABLE
    except NoWorker as exc:
        say(exc.line())
        return Exit.NO_WORKER
    except RedisFull as exc:
        say(exc.line())
        return Exit.REDIS_OUT_OF_MEMORY
    except (RedisError, OSError) as exc:
        if is_out_of_memory(exc):
            say(RedisFull(settings.redis_target.url).line())
            return Exit.REDIS_OUT_OF_MEMORY
        where = redact_url(settings.redis_target.url) if settings.redis_url else "its address"
        say(f"lost Redis at {where} ({_why(exc)})")
        return Exit.REDIS_UNREACHABLE
    except KeyboardInterrupt:
        say("interrupted")
        return Exit.INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
