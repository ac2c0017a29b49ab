"""The embedded Redis dies with the ``run`` that started it, even when that ``run`` is SIGKILLed;
and ``run`` says on its first lines which Redis it uses and why."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.support.processes import ROOT
from tests.support.redis_process import free_port
from tests.support.run_cli_site import DEFAULT_REDIS_VARIABLE
from worker import embedded
from worker.cli import run as cli_run
from worker.config import Settings
from worker.embedded import StateFile

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")


def run_env(runtime_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL" and not k.startswith("RESEARCH_")}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "XDG_RUNTIME_DIR": str(runtime_dir),
            DEFAULT_REDIS_VARIABLE: f"redis://127.0.0.1:{free_port()}/0",
            "RESEARCH_QUEUE": f"research-test:{runtime_dir.parent.name}:lifetime",
            "RESEARCH_LOG_FORMAT": "text",
            **extra,
        }
    )
    return env


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in {"Z", "X"}  # a zombie has exited; only its parent's wait is missing


def start_run(env: dict[str, str], log: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.run_cli", "run"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_embedded_redis_dies_with_the_run_that_started_it(tmp_path: Path, sig: signal.Signals) -> None:
    runtime_dir = tmp_path / "run"
    runtime_dir.mkdir(mode=0o700)
    state = StateFile(str(runtime_dir))
    with tempfile.TemporaryFile() as log:
        process = start_run(run_env(runtime_dir), log)
        try:
            deadline = time.monotonic() + 60
            while not state.path.exists():
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
            url = json.loads(state.path.read_bytes())["url"]
            assert embedded.redis_answers(url)
            [server] = [
                pid for pid in children(process.pid) if "redis" in Path(f"/proc/{pid}/comm").read_text()
            ]
            os.kill(process.pid, sig)
            process.wait(timeout=60)
            deadline = time.monotonic() + 10
            while alive(server) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not alive(server), "the embedded redis-server outlived its worker"
            assert not embedded.redis_answers(url)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    # Whatever is left of the state file names a Redis that does not answer: nobody uses it.
    assert embedded.locate(None, str(runtime_dir)).source is embedded.Origin.DEFAULT


def first_lines(env: dict[str, str]) -> list[str]:
    """The first lines ``run --burst`` logs (it stops once the queue is empty)."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.run_cli", "run", "--burst"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr.splitlines()[:3]


def test_run_says_it_started_an_embedded_redis_and_why(tmp_path: Path) -> None:
    runtime_dir = tmp_path / "run"
    runtime_dir.mkdir(mode=0o700)
    lines = first_lines(run_env(runtime_dir))
    using = next(line for line in lines if "using Redis at" in line)
    assert "unix://" in using and "started by this worker" in using and "REDIS_URL is unset" in using


def test_run_says_it_found_a_redis_on_the_default_address(tmp_path: Path, redis_url: str) -> None:
    runtime_dir = tmp_path / "run"
    runtime_dir.mkdir(mode=0o700)
    env = run_env(runtime_dir)
    env[DEFAULT_REDIS_VARIABLE] = redis_url
    using = next(line for line in first_lines(env) if "using Redis at" in line)
    assert "found on the default address" in using


def test_the_line_never_shows_a_password(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The shared test Redis has no password, so the line is checked where it is made: run's first
    # step, with the connection stood in for and stopped before the worker is built.
    class Stop(Exception):
        pass

    def no_connection(*args: object, **kwargs: object) -> None:
        raise Stop

    async def connected(*args: object, **kwargs: object) -> object:
        class Pool:
            async def aclose(self) -> None:
                return None

        return Pool()

    async def nobody_differs(*args: object) -> dict[str, list[str]]:
        return {}

    monkeypatch.setattr(cli_run, "reach", connected)
    monkeypatch.setattr("worker.runtime.fingerprint.others_differ", nobody_differs)
    monkeypatch.setattr("worker.settings.build_worker", no_connection)
    settings = Settings(redis_url="redis://ops:Pw9-secret@127.0.0.1:1/0")
    with caplog.at_level(logging.INFO, logger="research.cli"), pytest.raises(Stop):
        cli_run.cmd_run(argparse.Namespace(burst=True, render=False), settings)
    [line] = [r.getMessage() for r in caplog.records if "using Redis at" in r.getMessage()]
    assert "Pw9-secret" not in line and "ops:***@127.0.0.1:1" in line and "configured by REDIS_URL" in line
