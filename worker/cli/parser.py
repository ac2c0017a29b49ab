"""The command line's parser: every command, its arguments and its help, and nothing that runs one.

A command names its handler as ``"module:function"`` in ``worker.cli``; ``app`` imports that module
only when the command runs, so ``--help`` and ``--version`` start as fast as Python does.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib import metadata

from worker.cli.exits import ENVIRONMENT, EXIT_CODES
from worker.limits import DEFAULT_EXTRACT, DEFAULT_MAX_RESULTS, EXTRACT_MODES, MAX_RESULTS

# Adds one command: its name, summary, examples and handler ("module:function" in worker.cli).
AddCommand = Callable[[str, str, str, str], argparse.ArgumentParser]


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
            "Safe, bounded web access for a research agent: an arq worker with two tools on the web, "
            "web_search and fetch_page, a third, cite, that checks a quote against what was fetched, "
            "and the commands to run it, call it and watch it."
        ),
        epilog=f"{EXIT_CODES}\n\n{ENVIRONMENT}",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"research-worker {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, examples: str, handler: str) -> argparse.ArgumentParser:
        child = sub.add_parser(
            name,
            help=summary,
            description=summary,
            epilog=f"examples:\n{examples}\n\nexit codes: see `research-worker --help`",
            formatter_class=HelpFormatter,
        )
        child.set_defaults(handler=handler)
        return child

    _worker_command(command)
    _job_commands(command)
    _report_commands(command)
    _serving_commands(command)
    _health_command(command)
    return parser


def _worker_command(command: AddCommand) -> None:
    """`run`: a worker."""
    run = command(
        "run",
        "run a worker (with its own embedded Redis when REDIS_URL is unset and none answers)",
        "  REDIS_URL=redis://redis:6379/0 research-worker run --burst\n  research-worker run --render",
        "run:cmd_run",
    )
    run.add_argument("--burst", action="store_true", help="exit once the queue is empty")
    run.add_argument(
        "--render",
        action="store_true",
        help="run a render worker: headless Chromium for fetch_page's render (docs/render.md)",
    )


def _job_commands(command: AddCommand) -> None:
    """`fetch` and `search`: a job enqueued, waited for and printed."""
    fetch = command(
        "fetch",
        "enqueue a fetch_page job, wait, and print its result JSON on stdout",
        "  research-worker fetch https://example.org/ --report r-1 --seed\n"
        '  research-worker fetch https://example.org/paper.pdf --report r-1 --find "going concern"',
        "jobs:cmd_fetch",
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
        "jobs:cmd_search",
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


def _report_commands(command: AddCommand) -> None:
    """`check-url`, `budget`, `archive` and `verify`: looks at a URL and at a report."""
    check = command(
        "check-url",
        "print the guardian's verdict on a URL as one JSON line; never connects",
        "  research-worker check-url https://169.254.169.254/latest/meta-data/\n"
        "  research-worker check-url https://example.org/ --resolves-to 10.0.0.5",
        "tools:cmd_check_url",
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
        "reports:cmd_budget",
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
        "reports:cmd_archive",
    )
    archive.add_argument("report_id", metavar="REPORT", help="the report")
    archive.add_argument(
        "-o", "--output", default="-", metavar="FILE", help="where to write the file; - for stdout"
    )

    verify = command(
        "verify",
        "check a dossier's quotes against what a report fetched; print one JSON object (docs/citations.md)",
        "  research-worker verify r-1 dossier.json\n  research-worker verify r-1 - --wait 300",
        "verify:cmd_verify",
    )
    verify.add_argument("report_id", metavar="REPORT", help="the report whose fetches the quotes cite")
    verify.add_argument("file", metavar="FILE", help='a JSON list of {"url", "quote"}; - for stdin')
    _waiting_options(verify)


def _serving_commands(command: AddCommand) -> None:
    """`tools`, `mcp` and `dashboard`: what a model or a person is served."""
    tools = command(
        "tools",
        "print the tool definitions for the orchestrator's model, in an agent framework's format",
        "  research-worker tools\n  research-worker tools --format openai-responses",
        "tools:cmd_tools",
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
        "mcp:cmd_mcp",
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
        "dashboard:cmd_dashboard",
    )
    dashboard.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    dashboard.add_argument(
        "--port",
        type=_port,
        default=8300,
        metavar="PORT",
        help="the port to listen on, 1-65535 (0: any free port)",
    )


def _health_command(command: AddCommand) -> None:
    """`health`: the container probe."""
    command(
        "health",
        "exit 0 while this replica's health key is fresh (container probes), 5 when it is not",
        "  research-worker health\n  RESEARCH_WORKER_ID=worker-0 research-worker health",
        "run:cmd_health",
    )


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
