"""``dashboard``: the read-only monitoring page, served through Redis outages too."""

from __future__ import annotations

import argparse
import asyncio

from worker.cli.common import REACH_S, RedisUnreachable, close, locate, reach
from worker.cli.exits import say
from worker.config import Settings
from worker.dashboard import serve


def cmd_dashboard(args: argparse.Namespace, settings: Settings) -> int:
    settings, found = locate(settings)
    try:
        asyncio.run(close(reach(found, settings, REACH_S)))
    except RedisUnreachable as exc:
        # A dashboard is for watching outages too: it serves, its pages answer 503 saying why
        # until Redis is back, and its own /healthz stays 200. Wrong credentials still stop it.
        say(f"{exc.line()}; serving anyway, the pages answer 503 until Redis is back")
    return serve(settings, args.host, args.port)
