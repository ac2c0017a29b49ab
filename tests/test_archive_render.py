"""A rendered page's evidence: the document's exchange, the DOM the browser read as a
``conversion`` record that refers to it, and a PNG screenshot (bounded in pixels and bytes) as a
``resource``, all named by the result (``archive_record``, ``screenshot_record``) and shown on the
dashboard's job page. A fetch worker and a render worker on loopback, as deployed."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import html5lib

from jobs.render import screenshot
from tests.support.archive import exported
from tests.support.hostile_render import APP_TEXT, Traps, hostile_world
from tests.support.rendering import browser_only
from tests.support.tls import TestCA
from tests.test_fetch_render import _fetch, _settings, deployment
from worker.archive.ids import file_key
from worker.config import ArchiveDirectory, RenderMode, Settings

pytestmark = browser_only
WARCIO = [sys.executable, "-m", "warcio.cli"]


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height from the PNG's own IHDR chunk (not from any library of ours)."""
    assert png.startswith(screenshot.PNG_SIGNATURE) and png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


async def test_a_render_archives_its_document_its_dom_and_a_bounded_screenshot(
    settings: Settings, ca: TestCA, token: str, report: str, redis: Any, tmp_path: Path
) -> None:
    from warcio.archiveiterator import ArchiveIterator

    root = tmp_path / "archive"
    configured = _settings(settings, ca, RenderMode.ON, archive=ArchiveDirectory(str(root)))
    async with hostile_world(ca) as world:
        async with deployment(configured, token, render_worker=True) as client:
            result = await _fetch(client, report, f"{world.site}/shell", render=True)
        page_url = f"{world.site}/shell"
        await _dashboard_shows_the_screenshot(configured, result, world)
    assert result["ok"] and result["rendered"], result
    assert result["archived"] is True
    record, shot = result["archive_record"], result["screenshot_record"]
    assert record and shot and record != shot

    data = await exported(redis, ArchiveDirectory(str(root)), report)
    path = tmp_path / "render.warc.gz"
    path.write_bytes(data)
    checked = subprocess.run([*WARCIO, "check", "-v", str(path)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    found: dict[str, tuple[Any, bytes]] = {}
    for entry in ArchiveIterator(io.BytesIO(data)):
        found.setdefault(entry.rec_type, (entry.rec_headers, entry.content_stream().read()))
        if entry.rec_type != "warcinfo":
            assert entry.rec_headers.get_header("WARC-Research-Report") == report
            assert entry.rec_headers.get_header("WARC-Research-Job") == result["job_id"]
    response_headers, document = found["response"]
    assert response_headers.get_header("WARC-Record-ID") == f"<{record}>"
    assert response_headers.get_header("WARC-Target-URI") == page_url
    assert APP_TEXT.encode() not in document  # the document as served: its scripts build the text
    conversion_headers, dom = found["conversion"]
    assert conversion_headers.get_header("WARC-Refers-To") == f"<{record}>"
    assert APP_TEXT.encode() in dom  # the text the browser read, after the scripts ran
    resource_headers, png = found["resource"]
    assert resource_headers.get_header("WARC-Record-ID") == f"<{shot}>"
    assert resource_headers.get_header("Content-Type") == "image/png"
    assert resource_headers.get_header("WARC-Target-URI") == f"urn:view:{page_url}"
    width, height = png_size(png)
    assert 0 < width <= 1280 and 0 < height <= screenshot.MAX_HEIGHT
    assert len(png) <= screenshot.MAX_BYTES
    # Each of the two files opens with its warcinfo.
    for name in (record, shot):
        with (root / file_key(name)).open("rb") as f:
            first = next(iter(ArchiveIterator(f)))
            assert first.rec_type == "warcinfo"


async def _dashboard_shows_the_screenshot(settings: Settings, result: dict[str, Any], world: Traps) -> None:
    from tests.test_dashboard import serving

    async with serving(settings) as base, aiohttp.ClientSession() as session:
        async with session.get(f"{base}/job/{result['job_id']}") as response:
            page = await response.text()
        async with session.get(f"{base}/job/{result['job_id']}/screenshot.png") as response:
            status, kind, png = response.status, response.content_type, await response.read()
    tree = html5lib.parse(page, namespaceHTMLElements=False)
    images = [img.get("src") for img in tree.iter("img")]
    assert f"/job/{result['job_id']}/screenshot.png" in images
    assert (status, kind) == (200, "image/png")
    assert png_size(png)[0] > 0
