"""The dashboard command's own inputs and start-up: a port out of range is a usage error, and a
dashboard started while Redis is down serves its pages with 503 until Redis comes back."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.processes import ROOT
from tests.support.redis_process import RedisProcess, free_port
from worker.cli import Exit, build_parser

PARSER = build_parser()


def parsed_port(text: str) -> tuple[int | None, str]:
    """The port argparse reads from ``text``, or None and what it printed on stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return PARSER.parse_args(["dashboard", "--port", text]).port, ""
        except SystemExit as exited:
            code = exited.code
    return None, f"{code}\n{err.getvalue()}"


@settings(max_examples=300, deadline=None)
@given(port=st.one_of(st.integers(), st.text(max_size=12), st.floats().map(str)))
def test_any_port_is_a_port_or_a_usage_error(port: object) -> None:
    text = str(port)
    value, said = parsed_port(text)
    if value is None:
        assert said.startswith(f"{Exit.USAGE}\n")
        assert "--port" in said and "Traceback" not in said
    else:
        assert 0 <= value <= 65535 and int(text.strip()) == value


def test_a_port_past_65535_exits_2_with_a_usage_line_not_a_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "worker.cli", "dashboard", "--port", "99999"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == Exit.USAGE
    assert "Traceback" not in proc.stderr
    assert "argument --port: '99999' is not a port in 1..65535" in proc.stderr


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def wait_for(url: str, proc: subprocess.Popen[str], want: int) -> int:
    deadline = time.monotonic() + 30
    last = 0
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the dashboard exited with {proc.returncode}"
        with contextlib.suppress(OSError):
            last = status(url)
            if last == want:
                return last
        time.sleep(0.2)
    return last


def test_a_dashboard_started_while_redis_is_down_serves_503_until_redis_is_back(tmp_path: Path) -> None:
    server = RedisProcess(tmp_path, persistent=False)  # not started yet: its port answers nothing
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESEARCH_", "REDIS_URL"))}
    env.update({"PYTHONPATH": str(ROOT), "REDIS_URL": server.url, "RESEARCH_QUEUE": f"q-{tmp_path.name}"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker.cli", "dashboard", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        assert wait_for(f"{base}/healthz", proc, 200) == 200
        assert status(f"{base}/") == 503
        assert status(f"{base}/api/state") == 503
        server.start()
        assert wait_for(f"{base}/api/state", proc, 200) == 200
        assert status(f"{base}/") == 200
        with urllib.request.urlopen(f"{base}/api/state", timeout=5) as response:
            assert json.load(response)["queue"]["name"] == f"q-{tmp_path.name}"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
        server.stop()
    first = err.splitlines()[0]
    assert first.startswith(f"research-worker: cannot reach Redis at {server.url}")
    assert "serving anyway" in first
