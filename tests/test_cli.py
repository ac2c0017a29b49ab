"""The command line: each command, its help, and exit codes that mean one thing each."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata

import pytest
import redis.asyncio as aioredis
from aiohttp import web

from tests.support.fake_openrouter import KEY, fake_openrouter
from tests.support.fetch_workers import fetch_workers
from tests.support.processes import ROOT, forget_jobs, settings_env, start_worker, stop, wait_healthy
from tests.support.redis_process import free_port
from tests.support.run_cli import run_cli
from tests.support.run_cli_site import DEFAULT_REDIS_VARIABLE
from tests.support.tls import TestCA, serve
from worker.cli import Exit, HelpFormatter, build_parser
from worker.config import Settings
from worker.state import keys
from worker.state.budget import Budgets, OcrBudget, ReadBudget, Tool
from worker.state.menu import Menu


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize(
    ("url", "resolves_to", "verdict", "kind", "reason"),
    [
        ("https://example.org/", ["93.184.216.34"], "allow", None, "public"),
        ("https://example.org/", ["169.254.169.254"], "refuse", "destination_blocked", "link_local"),
        ("https://example.org/", ["93.184.216.34", "10.0.0.5"], "refuse", "destination_blocked", "private"),
        ("https://8.8.8.8/", [], "allow", None, "public"),
        ("https://127.0.0.1:6379/", [], "refuse", "destination_blocked", "loopback"),
        ("https://0x7f.1/", [], "refuse", "destination_blocked", "ambiguous_ip"),
        ("http://example.org/", [], "refuse", "scheme_not_allowed", "scheme"),
        ("https://[::ffff:10.0.0.1]/", [], "refuse", "destination_blocked", "private"),
    ],
    ids=[
        "a public answer",
        "the metadata address",
        "one private answer among public ones",
        "a public literal",
        "loopback Redis",
        "hex short form",
        "plain http",
        "mapped private IPv6",
    ],
)
def test_check_url_prints_the_guardians_verdict_and_exits_0_or_3(
    url: str, resolves_to: list[str], verdict: str, kind: str | None, reason: str
) -> None:
    args = ["check-url", url]
    for address in resolves_to:
        args += ["--resolves-to", address]
    proc = run_cli(*args)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    printed = json.loads(lines[0])
    assert (printed["verdict"], printed["kind"], printed["reason"]) == (verdict, kind, reason)
    assert proc.returncode == (Exit.OK if verdict == "allow" else Exit.REFUSED)


def test_check_url_honours_operator_allow_ranges() -> None:
    env = {**os.environ, "RESEARCH_GUARDIAN_ALLOW_CIDRS": "127.0.0.1/32", "PYTHONPATH": str(ROOT)}
    allowed = run_cli("check-url", "https://127.0.0.1/", env=env)
    refused = run_cli("check-url", "https://127.0.0.2/", env=env)
    assert json.loads(allowed.stdout)["reason"] == "operator_allow"
    assert allowed.returncode == Exit.OK
    assert refused.returncode == Exit.REFUSED


def test_check_url_rejects_a_bad_address_argument_as_a_usage_error() -> None:
    proc = run_cli("check-url", "https://example.org/", "--resolves-to", "not-an-ip")
    assert proc.returncode == Exit.USAGE
    assert "--resolves-to" in proc.stderr


async def test_budget_prints_the_reports_counters_menu_and_spend(
    settings: Settings, redis: aioredis.Redis, report: str
) -> None:
    budgets = Budgets(redis, settings)
    await budgets.charge(report, Tool.FETCH, "j1")
    await budgets.charge(report, Tool.SEARCH, "j2")
    await ReadBudget(redis, limit=settings.read_budget_chars, window_s=60).grant(report, "j3", 1234)
    ocr = OcrBudget(redis, limit=settings.ocr_budget_pages, window_s=60)
    await ocr.refund(report, await ocr.reserve(report, 7) - 3)  # 7 reserved, 4 given back: 3 read
    await Menu(redis, settings).record(report, ["https://a.test/", "https://b.test/"])
    proc = await asyncio.to_thread(run_cli, "budget", report, env=settings_env(settings))
    printed = json.loads(proc.stdout)
    assert proc.returncode == Exit.OK
    assert printed["fetch"] == {"used": 1, "limit": 25, "remaining": 24}
    assert printed["search"] == {"used": 1, "limit": 15, "remaining": 14}
    assert printed["read_chars"] == {"used": 1234, "limit": 2_000_000, "remaining": 2_000_000 - 1234}
    assert printed["ocr_pages"] == {"used": 3, "limit": 200, "remaining": 197}
    assert printed["menu_size"] == 2
    assert 0 < printed["expires_in_s"] <= 86400
    assert printed["spend"]["searches"] == 0


@pytest.mark.parametrize("command", ["budget", "fetch", "search"])
def test_a_bad_report_id_is_a_usage_error_and_enqueues_nothing(command: str, settings: Settings) -> None:
    args = {
        "budget": ["budget", "bad id"],
        "fetch": ["fetch", "https://example.org/", "--report", "bad id", "--enqueue-anyway"],
        "search": ["search", "anything", "--report", "bad id", "--enqueue-anyway"],
    }[command]
    proc = run_cli(*args, env=settings_env(settings))
    assert proc.returncode == Exit.USAGE
    assert proc.stderr.strip().splitlines() == [
        f"research-worker: {'ID' if command == 'budget' else '--report'}: "
        "the report id may contain only letters, digits and the characters - _ . :"
    ]
    assert proc.stdout == ""


async def test_search_enqueues_waits_and_prints_the_result(
    settings: Settings, report: str, token: str
) -> None:
    async with fake_openrouter() as fake:
        env = {
            "OPENROUTER_BASE_URL": fake.base_url,
            "OPENROUTER_API_KEY": KEY,
            "RESEARCH_USAGE_SOURCE": f"src-{token}",
        }
        worker = start_worker(settings, "search", module="tests.support.run_cli_worker", env=env)
        try:
            await asyncio.to_thread(wait_healthy, settings, 1)
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.support.run_cli",
                "search",
                "tidal energy",
                "--report",
                report,
                "--max-results",
                "2",
                cwd=ROOT,
                env=settings_env(settings, **env),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            out, _ = await asyncio.wait_for(proc.communicate(), 60)
        finally:
            log = stop(worker)
    result = json.loads(out)
    forget_jobs(settings, [result["job_id"]])
    assert proc.returncode == Exit.OK
    assert result["ok"] is True
    assert len(result["results"]) == 2
    assert KEY not in out.decode() and KEY not in log


def test_a_job_error_result_exits_1_and_names_its_kind(settings: Settings, report: str) -> None:
    worker = start_worker(settings, "refuser", module="tests.support.run_cli_worker")
    try:
        wait_healthy(settings, 1)
        proc = run_cli("fetch", "https://127.0.0.2/secret", "--report", report, env=settings_env(settings))
    finally:
        stop(worker)
    result = json.loads(proc.stdout)
    forget_jobs(settings, [result["job_id"]])
    assert proc.returncode == Exit.JOB_ERROR
    assert result["error"]["kind"] == "destination_blocked"
    assert result["url"] == "https://127.0.0.2/secret"
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("research-worker: fetch_page returned destination_blocked: 127.0.0.2 is refused")
    )


def test_a_fetch_the_menu_refuses_says_to_pass_seed(settings: Settings, report: str) -> None:
    # A name, not an address: the menu refuses it before any lookup (the net allows loopback only).
    worker = start_worker(settings, "menu", module="tests.support.run_cli_worker")
    try:
        wait_healthy(settings, 1)
        proc = run_cli("fetch", "https://site.test/not-seen", "--report", report, env=settings_env(settings))
    finally:
        stop(worker)
    result = json.loads(proc.stdout)
    forget_jobs(settings, [result["job_id"]])
    assert proc.returncode == Exit.JOB_ERROR
    assert result["error"]["kind"] == "url_not_in_menu"
    [line] = [line for line in proc.stderr.splitlines() if "returned url_not_in_menu" in line]
    assert line.endswith("pass --seed (it puts the URL on the menu first)")


def test_a_run_with_the_metrics_port_taken_says_so(settings: Settings) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_cli("run", "--burst", env=settings_env(settings, RESEARCH_METRICS_PORT=str(port)))
    assert proc.returncode == Exit.USAGE
    assert "RESEARCH_METRICS_PORT" in proc.stderr


def test_a_stopping_worker_logs_one_line_with_the_jobs_it_completed(settings: Settings) -> None:
    proc = run_cli("run", "--burst", env=settings_env(settings))
    lines = [json.loads(line) for line in proc.stderr.splitlines()]
    stopped = [line for line in lines if line["msg"] == "worker stopped"]
    assert proc.returncode == Exit.OK
    assert len(stopped) == 1
    assert stopped[0]["jobs_complete"] == 0
    assert stopped[0]["worker_id"]


# Redis down: every command gives up after about 2 s (health: about half a second) with one line.

DOWN_COMMANDS = {
    "run": ["run", "--burst"],
    "fetch": ["fetch", "https://example.org/", "--report", "r-1"],
    "search": ["search", "tidal energy", "--report", "r-1"],
    "budget": ["budget", "r-1"],
    "health": ["health"],
}


@dataclass(frozen=True)
class DownRun:
    port: int
    proc: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def down_runs() -> dict[str, DownRun]:
    """Every command against a Redis address where nothing listens, all at once (they only wait).

    How long each takes is bench/cli_fail_fast.py's figure; here the timeout only catches a command
    that waits out a deadline or retries on and on instead of giving up.
    """

    def down(command: str) -> DownRun:
        port = free_port()
        env = {**os.environ, "REDIS_URL": f"redis://:hunter2@127.0.0.1:{port}/0", "PYTHONPATH": str(ROOT)}
        return DownRun(port, run_cli(*DOWN_COMMANDS[command], env=env, timeout_s=30))

    with ThreadPoolExecutor(len(DOWN_COMMANDS)) as pool:
        return dict(zip(DOWN_COMMANDS, pool.map(down, DOWN_COMMANDS), strict=True))


@pytest.mark.parametrize("command", list(DOWN_COMMANDS))
def test_with_redis_down_every_command_exits_4_with_one_line_naming_the_url(
    command: str, down_runs: dict[str, DownRun]
) -> None:
    run = down_runs[command]
    assert run.proc.returncode == Exit.REDIS_UNREACHABLE
    assert run.proc.stderr.strip().splitlines() == [
        f"research-worker: cannot reach Redis at redis://:***@127.0.0.1:{run.port}/0 (connection refused); "
        "start that Redis, or point REDIS_URL at one that runs"
    ]
    assert run.proc.stdout == ""


def test_with_no_redis_url_and_nothing_at_the_default_address_the_line_says_how_to_start_one(
    tmp_path: os.PathLike[str],
) -> None:
    default = f"redis://127.0.0.1:{free_port()}/0"
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update({"PYTHONPATH": str(ROOT), DEFAULT_REDIS_VARIABLE: default, "XDG_RUNTIME_DIR": str(tmp_path)})
    proc = run_cli("budget", "r-1", env=env)
    assert proc.returncode == Exit.REDIS_UNREACHABLE
    assert proc.stderr.strip().splitlines() == [
        f"research-worker: cannot reach Redis at {default} (connection refused); start a worker with "
        "`research-worker run` (it brings its own Redis when none runs), or set REDIS_URL"
    ]


# No worker alive: fetch and search say so at once instead of waiting out the deadline.


@pytest.mark.parametrize(
    "args",
    [["fetch", "https://example.org/", "--seed"], ["search", "tidal energy"]],
    ids=["fetch", "search"],
)
async def test_with_no_worker_alive_fetch_and_search_exit_5_and_enqueue_nothing(
    args: list[str], settings: Settings, redis: aioredis.Redis, report: str
) -> None:
    # Without the check this would wait out the job's deadline (102 s), past run_cli's timeout.
    proc = await asyncio.to_thread(
        run_cli, *args, "--report", report, env=settings_env(settings), timeout_s=30
    )
    assert proc.returncode == Exit.NO_WORKER
    assert proc.stderr.strip().splitlines() == [
        f"research-worker: no worker is running on queue {settings.queue_name} at {settings.redis_url}; "
        "start one with `research-worker run`, or pass --enqueue-anyway to queue the job for a worker "
        "that starts later"
    ]
    assert await redis.zcard(settings.queue_name) == 0
    assert not await redis.exists(keys.menu(report))  # not even seeded


async def test_enqueue_anyway_queues_the_job_for_a_later_worker(
    settings: Settings, redis: aioredis.Redis, report: str
) -> None:
    proc = await asyncio.to_thread(
        run_cli,
        "fetch",
        "https://example.org/a",
        "--report",
        report,
        "--enqueue-anyway",
        "--wait",
        "0.5",
        env=settings_env(settings),
    )
    result = json.loads(proc.stdout)
    forget_jobs(settings, [result["job_id"]])
    assert proc.returncode == Exit.JOB_ERROR
    assert result["error"]["kind"] == "timeout"
    assert result["url"] == "https://example.org/a"
    assert await redis.zscore(settings.queue_name, result["job_id"]) is not None
    assert "returned timeout" in proc.stderr


async def test_health_is_0_while_this_replica_beats_and_5_when_it_does_not(settings: Settings) -> None:
    absent = await asyncio.to_thread(
        run_cli, "health", env=settings_env(settings, RESEARCH_WORKER_ID="nobody")
    )
    worker = start_worker(settings, "probe")
    try:
        await asyncio.to_thread(wait_healthy, settings, 1)
        probe_env = settings_env(settings, RESEARCH_WORKER_ID=f"{settings.worker_id}-probe")
        present = await asyncio.to_thread(run_cli, "health", env=probe_env)
    finally:
        stop(worker)
    assert (absent.returncode, present.returncode) == (Exit.NO_WORKER, Exit.OK)
    assert absent.stderr == present.stderr == ""
    # One line either way, naming the worker asked about and the queue.
    assert absent.stdout == f"unhealthy: worker nobody is not beating on queue {settings.queue_name}\n"
    assert present.stdout == (
        f"healthy: worker {settings.worker_id}-probe beats on queue {settings.queue_name}\n"
    )


# Help that teaches.


def test_every_option_of_every_command_has_help_and_a_default() -> None:
    formatter = HelpFormatter("research-worker")
    for name, command in subcommands().items():
        for action in command._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"{name} {action.dest} has no help"
            if action.option_strings and not action.required:
                assert "default" in formatter._get_help_string(action), f"{name} {action.dest}"


def test_each_commands_help_ends_with_examples_that_are_valid_commands() -> None:
    parser = build_parser()
    for name, command in subcommands().items():
        text = command.format_help()
        examples = text.split("examples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert 1 <= len(examples) <= 2, name
        for example in examples:
            words = shlex.split(example)
            while "=" in words[0]:
                words.pop(0)  # VARIABLE=value before the command
            assert words[0] == "research-worker"
            assert parser.parse_args(words[1:]).command == name, example


def test_the_help_names_every_exit_code_and_the_variables_that_matter() -> None:
    text = build_parser().format_help()
    for code in Exit:
        assert f"\n  {int(code):<4} " in text
    for variable in ("REDIS_URL", "RESEARCH_QUEUE", "OPENROUTER_API_KEY", "RESEARCH_LOG_FORMAT"):
        assert variable in text


def test_exit_codes_mean_one_thing_each() -> None:
    assert len({int(code) for code in Exit}) == len(Exit)


def test_version_prints_the_installed_version() -> None:
    proc = run_cli("--version")
    assert proc.returncode == Exit.OK
    assert proc.stdout.strip() == f"research-worker {metadata.version('research-worker')}"


def test_a_missing_command_is_a_usage_error() -> None:
    proc = run_cli()
    assert proc.returncode == Exit.USAGE
    assert "COMMAND" in proc.stderr


# While waiting on a terminal, fetch and search say so on stderr; anywhere else, nothing.


async def slow_page(request: web.Request) -> web.Response:
    await asyncio.sleep(1.5)
    return web.Response(text="<title>Slow</title><p>At last.</p>", content_type="text/html")


def read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("terminal", [True, False], ids=["on a terminal", "not on a terminal"])
async def test_a_fetch_shows_that_it_is_waiting_only_on_a_terminal(
    terminal: bool, settings: Settings, ca: TestCA, report: str
) -> None:
    async with (
        serve({"/slow": slow_page}, ca.server_context()) as server,
        fetch_workers(settings, ca, count=1, RESEARCH_URL_MENU="off"),
    ):
        main_fd, other_fd = os.openpty() if terminal else (-1, -1)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.support.run_cli",
            "fetch",
            server.url("/slow"),
            "--report",
            report,
            cwd=ROOT,
            env=settings_env(settings),
            stdout=subprocess.PIPE,
            stderr=other_fd if terminal else subprocess.PIPE,
        )
        if terminal:
            os.close(other_fd)
            reading = asyncio.create_task(asyncio.to_thread(read_all, main_fd))
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        if terminal:
            err = await reading
            os.close(main_fd)
    result = json.loads(out)
    forget_jobs(settings, [result["job_id"]])
    assert result["ok"] is True
    waiting = f"waiting for the fetch_page job on {settings.queue_name}".encode()
    if terminal:
        assert waiting in err
        assert err.endswith(b"\r\x1b[K")  # the line is cleared once the result is in
    else:
        assert waiting not in err
        assert b"\r" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["fetch", "https://example.org/", "--report", "r-1", "--wait", "-1"],
        ["fetch", "https://example.org/", "--report", "r-1", "--wait", "nan"],
        ["fetch", "https://example.org/", "--report", "r-1", "--wait", "inf"],
        ["search", "q", "--report", "r-1", "--wait", "soon"],
        ["search", "q", "--report", "r-1", "--max-results", "many"],
        ["fetch", "https://example.org/", "--report", "r-1", "--extract", "all"],
        ["fetch", "https://example.org/"],
        ["dashboard", "--port", "eighty"],
        ["dashboard", "--port", "99999"],
        ["dashboard", "--port", "-1"],
        ["dashboard", "--port", "65536"],
        ["tools", "--format", "yaml"],
        ["no-such-command"],
    ],
    ids=lambda argv: " ".join(argv[:1] + argv[-2:]),
)
def test_a_bad_option_is_a_usage_error_naming_it_not_a_traceback(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert exited.value.code == Exit.USAGE
    assert "error:" in err and "Traceback" not in err
