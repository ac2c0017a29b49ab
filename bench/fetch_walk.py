"""The walk of a fetch: how many times one cache-miss fetch_page enters each module of jobs/.

A private redis-server, a local TLS server with one small article, and a worker in this process
(the guardian trusting only 127.0.0.1); one fetch warms the imports and the connections, then a
fetch of another URL (a miss) runs under ``sys.setprofile``. A module is entered when one of its
functions starts (not a coroutine resuming) called from another module; an entry is a climb back
up when the module is already on the stack below the caller (a callback: the flow went down and
comes back up into it). The URL parses count the guardian's parses (``parse_https_url``) in the
job (under the worker's envelope), of the URL asked for and of any other (the page's links).

    python bench/fetch_walk.py [--root DIR]

``--root`` runs another checkout's code (e.g. main's, for the figures before a change) with this
script. Prints one row per module of jobs/ the fetch entered: entries, climbs back, calls.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import ipaddress
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

PAGE = (
    "<html><title>Walk</title><main><h1>Walk</h1>"
    + "<p>A step, then <a href='/c'>another</a>.</p>" * 20
    + "</main></html>"
)


class Walk:
    """Module entries and climbs of the frames a profiler sees."""

    def __init__(self, asked: str) -> None:
        self.asked = asked
        self.entries: collections.Counter[str] = collections.Counter()
        self.climbs: collections.Counter[str] = collections.Counter()  # entries from below
        self.calls: collections.Counter[str] = collections.Counter()
        self.parses: collections.Counter[str] = collections.Counter()
        self._started: set[int] = set()
        self._frames: list[FrameType] = []  # kept alive, so a frame's id is never reused

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back is not None else ""
        if event == "call":
            if id(frame) in self._started:
                return  # a coroutine resuming
            if frame.f_code.co_name == "_run_tool" and module == "worker.runtime.envelope":
                # The client shares this process: what it parsed on enqueueing is forgotten, as a
                # worker of its own would never have seen it.
                memo = getattr(sys.modules.get("jobs.facts"), "parsed_url", None)
                if memo is not None:
                    memo.cache_clear()
            self._started.add(id(frame))
            self._frames.append(frame)
            if frame.f_code.co_name == "parse_https_url" and "worker.runtime.envelope" in _below(frame):
                self.parses["the URL asked" if frame.f_locals.get("raw") == self.asked else "others"] += 1
            if module.startswith("jobs."):
                self.calls[module] += 1
                if caller != module:
                    self.entries[module] += 1
                    if module in _below(frame.f_back):
                        self.climbs[module] += 1


def _below(frame: FrameType | None) -> set[str]:
    """The modules on the stack under ``frame``'s caller."""
    found: set[str] = set()
    frame = frame.f_back if frame is not None else None
    while frame is not None:
        found.add(frame.f_globals.get("__name__", ""))
        frame = frame.f_back
    return found


async def main(root: Path) -> None:
    sys.path.insert(0, str(root))
    from aiohttp import web

    from bench._support import private_redis
    from tests.support.fake_dns import FakeResolver
    from tests.support.tls import make_ca, serve
    from tests.support.workers import running_worker
    from worker.client import ResearchClient
    from worker.config import Settings

    try:
        from jobs.fetch.tool import FetchPageTool  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        from jobs.fetch import FetchPageTool  # type: ignore[attr-defined, no-redef, unused-ignore]

    async def article(request: web.Request) -> web.StreamResponse:
        return web.Response(text=PAGE, content_type="text/html")

    redis = private_redis()
    try:
        with tempfile.TemporaryDirectory() as directory:
            ca = make_ca(Path(directory))
            settings = Settings(
                redis_url=redis.url,
                queue_name="walk:queue",
                worker_id="walk",
                guardian_allow_cidrs=(ipaddress.ip_network("127.0.0.1/32"),),
                ca_bundle=str(ca.bundle),
                url_menu=False,
            )
            routes = {"/a": article, "/b": article, "/c": article}
            async with (
                serve(routes, ca.server_context()) as server,
                running_worker(settings, [FetchPageTool(FakeResolver({}))]),
                ResearchClient(settings=settings, wait_s=60) as client,
            ):
                warm: Any = await client.fetch("walk", server.url("/a"))
                assert warm["ok"], warm
                walk = Walk(server.url("/b"))
                sys.setprofile(walk)
                try:
                    result: Any = await client.fetch("walk", server.url("/b"))
                finally:
                    sys.setprofile(None)
                assert result["ok"] and not result["cached"], result
    finally:
        redis.stop()
    print(f"{'module':<28} {'entries':>8} {'climbs':>7} {'calls':>6}")
    for module in sorted(walk.calls):
        print(f"{module:<28} {walk.entries[module]:>8} {walk.climbs[module]:>7} {walk.calls[module]:>6}")
    print("URL parses in the job:", dict(sorted(walk.parses.items())))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    asyncio.run(main(parser.parse_args().root))
