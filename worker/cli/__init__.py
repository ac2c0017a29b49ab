"""The ``research-worker`` command line.

Every command that needs Redis finds it as the others do (``REDIS_URL``, else the embedded Redis a
``run`` started, else the default address; ``worker.embedded``), tries for about two seconds, and
otherwise prints one line naming the URL it tried and how to start one. ``fetch`` and ``search``
first check that a worker is alive on the queue, so a job nobody will run is not left to time
out. Exit codes mean one thing each (``Exit``); ``--help`` lists them and the variables that matter.

It starts at once: ``main`` parses the arguments with the parser alone (``parser``, ``exits``), so
``--help`` and ``--version`` import nothing else, and only then imports the one module of the
command asked for (``run``, ``jobs``, ``reports``, ``tools``, ``mcp``, ``dashboard``) through ``app``.
"""

from __future__ import annotations

from collections.abc import Sequence

from worker.cli.exits import Exit
from worker.cli.parser import HelpFormatter, build_parser

__all__ = ["Exit", "HelpFormatter", "build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from worker.cli.app import run_command  # after parsing: --help and --version need none of it

    return run_command(args)
