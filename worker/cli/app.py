"""Running a parsed command: the settings, the logs, the command's own module, and one line and
one exit code for each way it can stop."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

from redis.exceptions import RedisError

from worker import embedded, logs
from worker.cli.common import NoWorker, RedisFull, RedisUnreachable, why
from worker.cli.exits import Exit, UsageError, say
from worker.config import ConfigError, Settings, redact_url
from worker.state.memory import is_out_of_memory

Command = Callable[[argparse.Namespace, Settings], int]


def handler_of(name: str) -> Command:
    """The handler a parser names as ``"module:function"``, its module imported now."""
    module, _, function = name.partition(":")
    handler: Command = getattr(importlib.import_module(f"worker.cli.{module}"), function)
    return handler


def run_command(args: argparse.Namespace) -> int:
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        say(f"configuration error: {exc}")
        return Exit.USAGE
    logs.configure(settings.log_level, settings.log_format)
    try:
        return int(handler_of(args.handler)(args, settings))
    except UsageError as exc:
        say(str(exc))
        return Exit.USAGE
    except ConfigError as exc:
        say(f"configuration error: {exc}")
        return Exit.USAGE
    except RedisUnreachable as exc:
        say(exc.line())
        return Exit.REDIS_UNREACHABLE
    except embedded.EmbeddedUnavailable as exc:
        say(str(exc))
        return Exit.REDIS_UNREACHABLE
    except NoWorker as exc:
        say(exc.line())
        return Exit.NO_WORKER
    except RedisFull as exc:
        say(exc.line())
        return Exit.REDIS_OUT_OF_MEMORY
    except (RedisError, OSError) as exc:
        if is_out_of_memory(exc):
            say(RedisFull(settings.redis_target.url).line())
            return Exit.REDIS_OUT_OF_MEMORY
        where = redact_url(settings.redis_target.url) if settings.redis_url else "its address"
        say(f"lost Redis at {where} ({why(exc)})")
        return Exit.REDIS_UNREACHABLE
    except KeyboardInterrupt:
        say("interrupted")
        return Exit.INTERRUPTED
