"""docs/tour.md runs as written: its ``sh`` blocks, in order, in one shell, on a machine where
nothing answers at the default Redis address (the shared Redis on 6379 stays up: the default is
pointed at a free port) and with no REDIS_URL, under the loopback guard."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.processes import ROOT
from tests.support.redis_process import free_port
from tests.support.run_cli_site import DEFAULT_REDIS_VARIABLE, write_sitecustomize
from worker.embedded import StateFile

TOUR = ROOT / "docs" / "tour.md"
BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def tour_blocks() -> list[str]:
    return BLOCK.findall(TOUR.read_text(encoding="utf-8"))


def test_the_tour_has_its_steps() -> None:
    script = "\n".join(tour_blocks())
    for step in (
        "trustme",
        "research-worker run",
        "research-worker fetch",
        "ResearchClient",
        "research:result:",
    ):
        assert step in script


def test_the_tour_runs_as_written(tmp_path: Path) -> None:
    runtime_dir = tmp_path / "run"
    runtime_dir.mkdir(mode=0o700)
    site = write_sitecustomize(tmp_path / "site-packages")
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL" and not k.startswith("RESEARCH_")}
    env.update(
        {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "PYTHONPATH": f"{site}{os.pathsep}{ROOT}",
            "XDG_RUNTIME_DIR": str(runtime_dir),
            DEFAULT_REDIS_VARIABLE: f"redis://127.0.0.1:{free_port()}/0",
        }
    )
    script = "set -euo pipefail\ntrap 'kill $(jobs -p) 2> /dev/null || true' EXIT\n" + "\n".join(
        tour_blocks()
    )
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=180)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    tour = tmp_path / "tour"
    worker_log = (tour / "worker.log").read_text() if (tour / "worker.log").exists() else ""
    assert process.returncode == 0, f"{out}\n{err}\n{worker_log}"

    assert "refused, exit code 3" in out
    fetched = json.loads((tour / "fetched.json").read_text())
    assert fetched["ok"] is True
    assert fetched["title"] == "Tidal power in the Pentland Firth"
    assert "Four turbines" in fetched["text"]
    assert fetched["extraction"] == "main" and "newsletter" not in fetched["text"]  # as the tour says
    assert "title: Tidal power in the Pentland Firth" in out
    assert "result key holds the same object: True" in out
    assert "started an embedded Redis" in worker_log
    assert out.rstrip().endswith("1")  # one "worker stopped" line
    assert not StateFile(str(runtime_dir)).path.exists()
