"""No secret the worker holds reaches the evidence archive: every record type the archive writes
(request, response, revisit, resource, metadata, and the export's warcinfo) is scanned for any run
of 16 characters of the key's secret part, whatever case or spacing a provider echoed it in."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import re
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from tests.support.archive import exported
from tests.support.fake_dns import FakeResolver
from tests.support.fake_openrouter import KEY, completion, fake_openrouter, url_citation
from tests.support.workers import running_worker
from worker.archive import index
from worker.archive.capture import Capture, Hop
from worker.archive.directory import DirectoryStore
from worker.archive.export import export
from worker.archive.masking import SecretMask
from worker.archive.writer import Archive
from worker.client import ResearchClient
from worker.config import ArchiveDirectory, SearchProvider, Secret, Settings
from worker.metrics import Metrics
from worker.settings import tools

SECRET_PART = KEY.removeprefix("sk-or-v1-").lower()  # 60 characters
RUN = 16


def leaks(data: bytes) -> list[str]:
    """Every 16-character run of the secret part in ``data``, case and whitespace aside (the oracle:
    written here, not the masker's own)."""
    dense = re.sub(rb"\s", b"", data).lower().decode("latin-1")
    return [
        SECRET_PART[i : i + RUN]
        for i in range(len(SECRET_PART) - RUN + 1)
        if SECRET_PART[i : i + RUN] in dense
    ]


def members(data: bytes) -> list[bytes]:
    found = []
    while data:
        inflater = zlib.decompressobj(31)
        found.append(inflater.decompress(data))
        data = inflater.unused_data
    return found


def record_type(member: bytes) -> str:
    found = re.search(rb"^WARC-Type: (\w+)\r$", member, re.MULTILINE)
    assert found is not None
    return found.group(1).decode()


# The ways a provider may repeat a key: whole, its secret part alone, upper-cased, broken by a line,
# cut to its first or last 20 characters.
SPELLINGS = [
    KEY,
    SECRET_PART,
    KEY.upper(),
    KEY[:30] + "\n  " + KEY[30:],
    SECRET_PART[:20],
    SECRET_PART[-20:],
    " ".join(SECRET_PART),
]


# -- the mask alone, on any bytes ---------------------------------------------------------------


@settings(max_examples=150)
@given(
    before=st.binary(max_size=200),
    after=st.binary(max_size=200),
    start=st.integers(0, len(SECRET_PART) - RUN),
    length=st.integers(RUN, len(SECRET_PART)),
    case=st.lists(st.booleans(), min_size=len(SECRET_PART), max_size=len(SECRET_PART)),
    gaps=st.lists(st.sampled_from(["", "", "", " ", "\n", "\r\n", "\t"]), min_size=60, max_size=60),
    prefixed=st.booleans(),
)
def test_any_piece_of_the_key_in_any_bytes_is_masked(
    before: bytes,
    after: bytes,
    start: int,
    length: int,
    case: list[bool],
    gaps: list[str],
    prefixed: bool,
) -> None:
    piece = SECRET_PART[start : start + length]
    spelled = "".join(
        (ch.upper() if up else ch) + gap for ch, up, gap in zip(piece, case, gaps, strict=False)
    )
    echoed = (("sk-or-v1-" if prefixed and start == 0 else "") + spelled).encode()
    masked = SecretMask([KEY]).mask(before + echoed + after)
    assert leaks(masked) == []
    assert b"***" in masked


@given(st.binary(max_size=400))
def test_bytes_without_the_key_come_back_unchanged(data: bytes) -> None:
    if leaks(data) or b"sk-or" in data.lower():
        return
    assert SecretMask([KEY]).mask(data) == data


def test_a_mask_with_no_secret_changes_nothing() -> None:
    assert SecretMask([""]).mask(KEY.encode()) == KEY.encode()
    assert SecretMask([]).empty


# -- every record the archive writes ------------------------------------------------------------


def hop(url: str, body: bytes, status: bytes, echoed: bytes) -> Hop:
    return Hop(
        url=url,
        at=dt.datetime.now(dt.UTC),
        peer="127.0.0.1",
        request_head=b"GET / HTTP/1.1\r\nHost: example.org\r\nX-Echo: " + echoed + b"\r\n\r\n",
        response_head=b"HTTP/1.1 " + status + b"\r\nX-Echo: " + echoed + b"\r\n\r\n",
        identity=True,
        chunks=[body] if body else [],
    )


def a_fetch(echoed: str) -> Capture:
    """A redirect and a page, the key in the URL, both heads and the body of each hop."""
    raw = echoed.replace("\n", " ").encode()
    capture = Capture()
    capture.hops = [
        hop(f"https://example.org/a?k={echoed.split()[0]}", b"", b"302 Found", raw),
        hop(
            "https://example.org/b",
            b"<p>The key is " + echoed.encode() + b".</p>" + b" padding" * 200,
            b"200 OK",
            raw,
        ),
    ]
    return capture


@pytest.mark.parametrize("echoed", SPELLINGS)
async def test_every_record_type_the_archive_writes_is_free_of_the_key(
    echoed: str, tmp_path: Path, redis: aioredis.Redis, token: str
) -> None:
    report = f"r-{token}"
    store = DirectoryStore(tmp_path / "archive")
    archive = Archive(
        store,
        redis,
        Metrics(),
        queue_name=f"q-{token}",
        worker_id="w",
        days=90,
        window_s=60,
        secrets=SecretMask([KEY]),
    )
    archive.start()
    try:
        first = archive.fetched(report, a_fetch(echoed))
        assert await first.landed(within_s=30) is not None
        again = archive.fetched(report, a_fetch(echoed))  # the same payload: a revisit
        assert await again.landed(within_s=30) is not None
        searched = archive.searched(
            report,
            endpoint=f"https://openrouter.example/api?key={echoed.split()[0]}",
            content_type="application/json",
            answer=orjson.dumps({"choices": [{"message": {"content": f"As asked, your key: {echoed}"}}]}),
            summary={"query": f"what is {echoed}", "results": [{"title": echoed, "url": "https://e.org/"}]},
        )
        assert await searched.landed(within_s=30) is not None
        cited = await index.cited(redis, report)
        data = b"".join([chunk async for chunk in export(store, report, cited)])
    finally:
        await archive.stop()
    parts = members(data)
    assert {record_type(member) for member in parts} == {
        "warcinfo",
        "request",
        "response",
        "revisit",
        "resource",
        "metadata",
    }
    for member in parts:
        assert leaks(member) == [], record_type(member)
    # Still valid WARC whose digests verify over the masked bytes.
    assert len(list(ArchiveIterator(io.BytesIO(data), check_digests="raise"))) == len(parts)


# -- end to end: a provider's answer that repeats the key ---------------------------------------


async def test_a_provider_answer_that_repeats_the_key_reaches_the_export_masked(
    settings: Settings, redis: aioredis.Redis, token: str, tmp_path: Path
) -> None:
    target = ArchiveDirectory(str(tmp_path / "archive"))
    async with fake_openrouter() as fake:
        s = dataclasses.replace(
            settings,
            openrouter_base_url=fake.base_url,
            openrouter_api_key=Secret(KEY),
            search_provider=SearchProvider.OPENROUTER_PLUGIN,
            search_timeout_s=30.0,
            archive=target,
        )
        reply = completion([url_citation("https://example.org/tides", title=f"Tides {SECRET_PART[:24]}")])
        body: dict[str, Any] = orjson.loads(reply.body)
        body["choices"][0]["message"]["content"] = (
            f"Here is your key again: {KEY.upper()} and {SECRET_PART[8:40]}"
        )
        fake.will(dataclasses.replace(reply, body=orjson.dumps(body)))
        async with (
            running_worker(s, list(tools(FakeResolver({})))),
            ResearchClient(settings=s, job_id_prefix=f"{token}-", wait_s=60) as client,
        ):
            found = await client.search(f"r-{token}", "tides")
    assert found["ok"], found
    assert found["archive_record"] is not None
    data = await exported(redis, target, f"r-{token}")
    parts = members(data)
    assert {"warcinfo", "resource", "metadata"} <= {record_type(member) for member in parts}
    assert [leaks(member) for member in parts] == [[] for _ in parts]
    assert b"Here is your key again: ***" in b"".join(parts)


@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(SPELLINGS))
def test_a_held_searxng_password_and_an_org_key_are_masked_too(echoed: str) -> None:
    org = "sk-or-v1-" + "9f3b" * 16
    mask = SecretMask(["a-long-searxng-password-0001", org])
    text = f"pw=a-long-searxng-password-0001 org={org.upper()} ours={echoed}".encode()
    masked = mask.mask(text)
    assert b"a-long-searxng-password-0001" not in masked
    assert org[9:].encode() not in masked.lower()
    assert masked.count(b"***") == 2  # the key of this test is not held by this mask: kept
