"""``research-worker mcp --http`` as an operator runs it: the real command line, in its own process.

A token removed from the tokens file is refused within 5 s, in an open session and a new one; a
server bound to 127.0.0.2 answers its own clients; a foreign ``Host`` without a token is 421 (the
documented order: Host before the token); the SDK's line naming another token's session id is
not in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.support.mcp_http import OTHER_TOKEN, TOKEN, write_tokens
from tests.support.processes import settings_env
from tests.support.run_cli import ROOT
from worker.config import Settings

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
LISTING = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
SERVING = re.compile(r'"url":"(http://[^"]+/mcp)"')


class Server:
    def __init__(self, url: str, process: asyncio.subprocess.Process, log: Path) -> None:
        self.url = url
        self.process = process
        self.log = log

    async def post(self, body: dict[str, Any], token: str | None, **headers: str) -> httpx2.Response:
        sent = {**HEADERS, **headers}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        async with httpx2.AsyncClient(timeout=20.0) as http:
            return await http.post(self.url, content=json.dumps(body).encode(), headers=sent)

    async def session(self, token: str) -> str:
        opened = await self.post(INITIALIZE, token)
        assert opened.status_code == 200, opened.text
        session_id = opened.headers["mcp-session-id"]
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self.post(done, token, **{"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-06-18"})
        return session_id

    async def listing(self, token: str, session_id: str) -> int:
        headers = {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-06-18"}
        return (await self.post(LISTING, token, **headers)).status_code


@contextlib.asynccontextmanager
async def mcp_http(
    settings: Settings, tokens: Path, tmp: Path, host: str = "127.0.0.1"
) -> AsyncIterator[Server]:
    env = settings_env(settings, RESEARCH_MCP_TOKENS_FILE=str(tokens), RESEARCH_LOG_FORMAT="json")
    log = tmp / "mcp.log"
    with log.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.support.run_cli",
            "mcp",
            "--http",
            "--host",
            host,
            "--port",
            "0",
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    try:
        async with asyncio.timeout(60):
            while not (found := SERVING.search(log.read_text())):
                assert process.returncode is None, log.read_text()
                await asyncio.sleep(0.1)
        yield Server(found.group(1), process, log)
    finally:
        if process.returncode is None:
            process.terminate()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(15):
                    await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


def replace_file(path: Path, tokens: dict[str, str]) -> None:
    """Written aside and renamed over: how an operator (or a Secret's update) changes the file."""
    fresh = write_tokens(path.with_suffix(".new"), tokens)
    os.replace(fresh, path)


async def test_a_removed_token_is_refused_within_5_s_in_open_and_new_sessions(
    settings: Settings, tmp_path: Path
) -> None:
    path = write_tokens(tmp_path / "tokens.json", {TOKEN: "acme", OTHER_TOKEN: "globex"})
    async with mcp_http(settings, path, tmp_path) as server:
        kept = await server.session(OTHER_TOKEN)
        revoked = await server.session(TOKEN)
        assert await server.listing(TOKEN, revoked) == 200
        replace_file(path, {OTHER_TOKEN: "globex"})
        changed = time.monotonic()
        while (status := await server.listing(TOKEN, revoked)) == 200:
            assert time.monotonic() - changed < 5.0, "the removed token still works after 5 s"
            await asyncio.sleep(0.1)
        took = time.monotonic() - changed
        assert status == 401
        assert (await server.post(INITIALIZE, TOKEN)).status_code == 401  # no new session either
        assert await server.listing(OTHER_TOKEN, kept) == 200  # the token that stayed still works
        replace_file(path, {OTHER_TOKEN: "globex", TOKEN: "acme"})  # and one added back works again
        async with asyncio.timeout(5):
            while (await server.post(INITIALIZE, TOKEN)).status_code != 200:
                await asyncio.sleep(0.1)
    assert took < 5.0


async def test_a_tokens_file_that_turns_invalid_refuses_every_token_until_it_is_good(
    settings: Settings, tmp_path: Path
) -> None:
    path = write_tokens(tmp_path / "tokens.json", {TOKEN: "acme"})
    async with mcp_http(settings, path, tmp_path) as server:
        assert (await server.post(INITIALIZE, TOKEN)).status_code == 200
        path.write_text('{"half": ', encoding="utf-8")
        async with asyncio.timeout(5):
            while (await server.post(INITIALIZE, TOKEN)).status_code != 401:
                await asyncio.sleep(0.1)
        said = server.log.read_text()
    assert "every token is refused" in said and TOKEN not in said


@pytest.mark.parametrize("host", ["127.0.0.2", "127.0.0.1"])
async def test_a_server_on_a_loopback_address_answers_its_own_clients(
    settings: Settings, tmp_path: Path, host: str
) -> None:
    path = write_tokens(tmp_path / "tokens.json", {TOKEN: "acme"})
    async with mcp_http(settings, path, tmp_path, host) as server:
        assert server.url.startswith(f"http://{host}:")
        own = await server.post(INITIALIZE, TOKEN)  # Host: 127.0.0.2:PORT, as every client sends
        by_name = await server.post(INITIALIZE, TOKEN, Host="localhost")
        foreign = await server.post(INITIALIZE, TOKEN, Host="evil.example")
        foreign_without_token = await server.post(INITIALIZE, None, Host="evil.example:80")
        own_without_token = await server.post(INITIALIZE, None)
    assert (own.status_code, by_name.status_code) == (200, 200)
    assert foreign.status_code == 421
    assert foreign_without_token.status_code == 421  # Host before the token, as documented
    assert own_without_token.status_code == 401


async def test_another_tokens_session_id_is_404_and_never_in_the_log(
    settings: Settings, tmp_path: Path
) -> None:
    path = write_tokens(tmp_path / "tokens.json", {TOKEN: "acme", OTHER_TOKEN: "globex"})
    async with mcp_http(settings, path, tmp_path) as server:
        session_id = await server.session(TOKEN)
        assert await server.listing(OTHER_TOKEN, session_id) == 404
        await asyncio.sleep(0.3)
        said = server.log.read_text()
    assert session_id not in said and session_id[:16] not in said
    assert "another token's session" in said
