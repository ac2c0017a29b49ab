"""docs/archive.md's replay section, run as written, with pywb from PyPI: a report's export (a
page, a capture cut at the byte cap, a 404) is added to a collection, ``wayback`` serves it, the
page of captures lists each URL, and each capture replays in full and ends, the cut one too (its
head says the bytes kept: pywb sends that Content-Length, then the payload).

pywb is not a dependency of the project (it brings gevent and a web stack of its own): install it in
a virtualenv of its own, ``python3 -m venv /tmp/pywb && /tmp/pywb/bin/pip install pywb``, and
point ``RESEARCH_TEST_PYWB`` at its ``bin`` folder (or put ``wb-manager`` on the PATH); else this
file is skipped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.archive import exported
from tests.support.fetching import fetch_settings
from tests.support.tls import TestCA, serve
from tests.test_archive_evidence import GONE, LONG, routes, run_fetches
from worker.config import ArchiveDirectory, Settings

BIN = os.environ.get("RESEARCH_TEST_PYWB") or (
    str(Path(found).parent) if (found := shutil.which("wb-manager")) else None
)
pytestmark = pytest.mark.skipif(
    BIN is None or not (Path(BIN) / "wayback").exists(),
    reason="needs pywb (RESEARCH_TEST_PYWB=/path/to/venv/bin, see this file's docstring)",
)
REPLAY_S = 20.0  # a replay that has not ended by then hangs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def wayback(root: Path, port: int) -> Iterator[str]:
    assert BIN is not None
    log = (root / "wayback.log").open("wb")
    process = subprocess.Popen(
        [str(Path(BIN) / "wayback"), "-p", str(port), "-b", "127.0.0.1"], cwd=root, stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


async def get(url: str) -> tuple[int, bytes]:
    timeout = aiohttp.ClientTimeout(total=REPLAY_S)
    async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as response:
        return response.status, await response.read()


async def test_an_export_replays_in_pywb_as_the_docs_say_and_a_cut_capture_ends(
    settings: Settings, ca: TestCA, token: str, report: str, redis: Any, tmp_path: Path
) -> None:
    assert BIN is not None
    target = ArchiveDirectory(str(tmp_path / "archive"))
    s = fetch_settings(settings, ca, archive=target, fetch_max_bytes=4096)
    async with serve(routes(), ca.server_context()) as server:
        cut, gone = await run_fetches(s, token, report, [server.url("/long"), server.url("/gone")])
    assert cut["ok"] and cut["truncated"] and gone["status"] == 404
    export = tmp_path / f"{report}.warc.gz"
    export.write_bytes(await exported(redis, target, report))

    # As docs/archive.md writes it: wb-manager init, wb-manager add, wayback (on a free port).
    root = tmp_path / "pywb"
    root.mkdir()
    for step in (["init", "evidence"], ["add", "evidence", str(export)]):
        done = subprocess.run(
            [str(Path(BIN) / "wb-manager"), *step], cwd=root, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
    with wayback(root, free_port()) as base:
        for url in (server.url("/long"), server.url("/gone")):
            status, listing = await get(f"{base}/evidence/cdx?url={url}&output=json")
            assert status == 200 and url.encode() in listing
            status, _ = await get(f"{base}/evidence/*/{url}")  # the page of captures, as the docs say
            assert status == 200
        # The capture as it was received (id_), and as pywb rewrites it for a browser (mp_): both
        # end within the bound; the cut one gives exactly the bytes the reader got.
        status, body = await get(f"{base}/evidence/2id_/{server.url('/long')}")
        assert (status, body) == (200, LONG[:4096])
        status, body = await get(f"{base}/evidence/2mp_/{server.url('/long')}")
        assert status == 200 and b"Long page text." in body
        status, body = await get(f"{base}/evidence/2id_/{server.url('/gone')}")
        assert (status, body) == (404, GONE)


def test_the_replay_steps_in_the_docs_are_the_ones_run_here() -> None:
    docs = (Path(__file__).resolve().parents[1] / "docs" / "archive.md").read_text()
    for step in ("wb-manager init evidence", "wb-manager add evidence r-1.warc.gz", "wayback"):
        assert step in docs
    assert "/evidence/*/https://example.org/page" in docs
