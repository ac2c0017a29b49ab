"""What the command line says when it stops: its exit codes, one thing each, and its one-line messages.

Light on purpose: ``--help`` and ``--version`` import this and the parser, nothing else.
"""

from __future__ import annotations

import sys
from enum import IntEnum

from worker.redact import redact_urls


class Exit(IntEnum):
    """What the process's exit code means: one thing each."""

    OK = 0
    JOB_ERROR = 1  # the job ran and returned an error result
    USAGE = 2  # usage or configuration error (argparse uses 2 as well)
    REFUSED = 3  # check-url: the guardian refuses the URL
    REDIS_UNREACHABLE = 4
    NO_WORKER = 5
    REDIS_OUT_OF_MEMORY = 6
    INTERRUPTED = 130


EXIT_CODES = """exit codes:
  0    success
  1    the job ran and returned an error result (its kind is printed on stderr)
  2    usage or configuration error
  3    refused by the guardian (check-url); a fetch the guardian or the URL menu refuses is a
       job error result (1) naming scheme_not_allowed, destination_blocked or url_not_in_menu
  4    Redis unreachable (after trying for about 2 s; health: about 0.4 s)
  5    no worker alive on the queue (fetch, search; health: this replica is not beating)
  6    Redis is out of memory: it refused a write (maxmemory with noeviction); nothing was queued
  130  interrupted (Ctrl-C)"""

ENVIRONMENT = """environment (every variable: docs/contract.md):
  REDIS_URL                      where Redis is; unset: the embedded Redis a `run` started on
                                 this machine, else redis://127.0.0.1:6379/0
  RESEARCH_QUEUE                 the queue (default research:queue)
  OPENROUTER_API_KEY             the key web_search uses
  RESEARCH_GUARDIAN_ALLOW_CIDRS  ranges fetched despite the guardian, e.g. 127.0.0.1/32
  RESEARCH_CA_BUNDLE             an extra CA file trusted for fetches
  RESEARCH_URL_MENU              on (default): a report fetches only URLs it has seen
  RESEARCH_LOG_FORMAT            text or json (default: text on a terminal, json otherwise)
  RESEARCH_LOG_LEVEL             DEBUG, INFO (default), WARNING or ERROR"""


class UsageError(Exception):
    """A command's arguments do not fit together: one line, exit 2."""


def say(line: str) -> None:
    sys.stderr.write(f"research-worker: {redact_urls(line)}\n")
    sys.stderr.flush()
