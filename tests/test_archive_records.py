"""WARC records and archive names as families: whatever bytes a server sends in its head and body
come back from the record exactly, with digests that verify; no id or setting a caller or a
server chose becomes a path."""

from __future__ import annotations

import datetime as dt
import io
import re
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from worker.archive.capture import Capture, Hop
from worker.archive.ids import day_of, digest_name, file_key, new_record_id, parse_record_id
from worker.archive.records import Original, Stamp, fetch_file, payload_digest
from worker.config import ArchiveBucket, ArchiveDirectory, ConfigError, Settings

STAMP = Stamp("r-1", "job-1", {"operator": "tests"})

KEY = re.compile(
    r"records/\d{4}-\d{2}-\d{2}/[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.warc\.gz"
)

# Header names are tokens; values any bytes but CR, LF and NUL (what an HTTP parser lets through).
names = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=1, max_size=20
)
values = st.binary(max_size=60).map(lambda b: bytes(c for c in b if c not in b"\r\n\x00").strip())
heads = st.lists(st.tuples(names, values), max_size=8)


def capture_of(headers: list[tuple[str, bytes]], body: bytes, hops: int = 1) -> Capture:
    capture = Capture()
    for n in range(hops):
        last = n == hops - 1
        status = b"HTTP/1.1 200 OK" if last else b"HTTP/1.1 302 Found"
        head = b"\r\n".join([status, *(k.encode() + b": " + v for k, v in headers)]) + b"\r\n\r\n"
        capture.hops.append(
            Hop(
                url=f"https://example.org/{n}",
                at=dt.datetime.now(dt.UTC),
                peer="203.0.113.7",
                request_head=f"GET /{n} HTTP/1.1\r\nHost: example.org\r\n\r\n".encode(),
                response_head=head,
                identity=True,
                chunks=[body] if last else [],
            )
        )
    return capture


def members(data: bytes) -> list[bytes]:
    """Each gzip member's plain bytes: the file is one member per record."""
    found = []
    while data:
        inflater = zlib.decompressobj(31)
        found.append(inflater.decompress(data))
        data = inflater.unused_data
    return found


@settings(max_examples=60, deadline=None)
@given(heads, st.binary(max_size=3000), st.integers(min_value=1, max_value=3))
def test_any_head_and_body_come_back_exactly_with_digests_that_verify(
    headers: list[tuple[str, bytes]], body: bytes, hops: int
) -> None:
    capture = capture_of(headers, body, hops)
    final = new_record_id()
    data = fetch_file(capture, final, STAMP)
    records = []
    for record in ArchiveIterator(io.BytesIO(data), check_digests="raise"):
        records.append(
            (record.rec_type, record.rec_headers.get_header("WARC-Record-ID"), record.raw_stream.read())
        )
        assert record.rec_headers.get_header("WARC-Research-Report") == "r-1"
        assert record.rec_headers.get_header("WARC-Research-Job") == "job-1"
    assert [kind for kind, _, _ in records] == ["warcinfo"] + ["response", "request"] * hops
    assert records[-2][1] == f"<{final}>" and records[-2][2] == body
    # The head is in the record byte for byte, as the server sent it.
    plain = members(data)
    assert capture.hops[-1].response_head in plain[-2]
    assert all(capture.hops[i].request_head in plain[2 * i + 2] for i in range(hops))


@settings(max_examples=30, deadline=None)
@given(heads, st.binary(min_size=1, max_size=2000))
def test_a_revisit_carries_the_payload_s_digest_and_refers_to_its_original(
    headers: list[tuple[str, bytes]], body: bytes
) -> None:
    original = Original(new_record_id(), "https://example.org/first", "2026-01-01T00:00:00.000000Z")
    data = fetch_file(capture_of(headers, body), new_record_id(), STAMP, original)
    record = list(ArchiveIterator(io.BytesIO(data)))[1]
    assert record.rec_type == "revisit"
    assert record.rec_headers.get_header("WARC-Refers-To") == f"<{original.record}>"
    assert record.rec_headers.get_header("WARC-Payload-Digest") == payload_digest(body)
    # The record holds the HTTP head only: the payload itself is not stored again.
    assert record.rec_headers.get_header("Content-Length") == str(
        len(b"".join(capture_of(headers, body).hops[-1].response_head.split(b"\0")))
    )


def test_a_chunked_response_keeps_its_transfer_coding_under_another_name() -> None:
    from tests.support.archive import read_records

    chunked = capture_of([("Transfer-Encoding", b"chunked")], b"5\r\nhello\r\n0\r\n\r\n")
    chunked.hops[-1].response_head = chunked.hops[-1].response_head  # as the fetcher saw it
    from worker.archive.capture import RENAMED

    hop = chunked.hops[-1]
    hop.response_head = hop.response_head.replace(b"Transfer-Encoding", RENAMED + b"Transfer-Encoding")
    records = read_records(fetch_file(chunked, new_record_id(), STAMP))
    assert records[1].content == b"5\r\nhello\r\n0\r\n\r\n"  # the de-chunked payload, not de-chunked again


@given(st.text(max_size=80))
def test_any_text_is_a_record_id_only_if_it_is_one_this_worker_makes(text: str) -> None:
    parsed = parse_record_id(text)
    assert parsed is None or KEY.fullmatch(file_key(parsed))


@given(st.floats(min_value=0, max_value=2**47 / 1000, allow_nan=False))
def test_a_record_id_names_the_day_it_was_made_and_a_key_of_hex_only(now_s: float) -> None:
    record = new_record_id(now_s)
    assert parse_record_id(record) == record
    assert KEY.fullmatch(file_key(record))
    assert day_of(record) == dt.datetime.fromtimestamp(int(now_s * 1000) / 1000, dt.UTC).strftime("%Y-%m-%d")


@given(st.text(max_size=60))
def test_a_digest_name_is_letters_only_or_refused(text: str) -> None:
    try:
        name = digest_name(text)
    except ValueError:
        return
    assert re.fullmatch(r"[A-Z2-7]{32}", name)


@given(st.text(min_size=1, max_size=120).filter(lambda t: t.strip() != ""))
def test_any_research_archive_value_is_a_target_or_a_one_line_error(raw: str) -> None:
    try:
        target = Settings.from_env({"RESEARCH_ARCHIVE": raw, "HOME": "/home/u"}).archive
    except ConfigError as exc:
        message = str(exc)
    else:
        message = ""
    if message:
        assert message.startswith("RESEARCH_ARCHIVE: ")
        return
    if isinstance(target, ArchiveBucket):
        assert ".." not in target.prefix.split("/") and "\x00" not in target.prefix
        assert target.prefix == "" or target.prefix.endswith("/")
    else:
        assert target is None or isinstance(target, ArchiveDirectory)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RESEARCH_ARCHIVE_DAYS": "0"}, "RESEARCH_ARCHIVE_DAYS"),
        ({"RESEARCH_ARCHIVE_DAYS": "ninety"}, "RESEARCH_ARCHIVE_DAYS"),
        ({"RESEARCH_ARCHIVE_ENDPOINT": "http://127.0.0.1:9000"}, "is not an s3:// URL"),
        (
            {"RESEARCH_ARCHIVE": "s3://bkt/x", "RESEARCH_ARCHIVE_ENDPOINT": "ftp://x"},
            "RESEARCH_ARCHIVE_ENDPOINT",
        ),
        ({"RESEARCH_ARCHIVE": "s3://UPPER/x"}, "bucket name"),
        ({"RESEARCH_ARCHIVE": "s3://bkt/a/../b"}, "'..'"),
        ({"RESEARCH_ARCHIVE": "https://example.org/archive"}, "must be 'off'"),
    ],
)
def test_a_bad_archive_setting_is_a_one_line_error_naming_the_variable(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Settings.from_env({"HOME": "/home/u", **env})


def test_the_default_archive_is_a_folder_in_the_user_s_data_directory() -> None:
    assert Settings.from_env({"HOME": "/home/u"}).archive == ArchiveDirectory(
        "/home/u/.local/share/research-worker/archive"
    )
    assert Settings.from_env({"XDG_DATA_HOME": "/data"}).archive == ArchiveDirectory(
        "/data/research-worker/archive"
    )
    assert Settings.from_env({"HOME": "/home/u", "RESEARCH_ARCHIVE": "off"}).archive is None


# The revisit's digest with its values written out (SHA-1 in base32, computed once by hand with
# hashlib, not by the code under test): a body one character apart has another digest.
@pytest.mark.parametrize(
    ("body", "digest"),
    [
        (b"<html><body>The same page, twice.</body></html>" * 40, "sha1:X2T2QB2OBE7PHR7BFESFYQSP5GVS2IUU"),
        (b"<html><body>The same page, twice!</body></html>" * 40, "sha1:PKJI6NWRBEWLR4VFHU65OPALUFIX25M2"),
        (b"hello world", "sha1:FKXGYNOJJ7H3IFO35FPUBC445EPOQRXN"),
    ],
)
def test_a_revisit_s_digest_is_the_sha1_of_its_body(body: bytes, digest: str) -> None:
    original = Original(new_record_id(), "https://example.org/first", "2026-01-01T00:00:00.000000Z")
    data = fetch_file(capture_of([("Content-Type", b"text/html")], body), new_record_id(), STAMP, original)
    record = next(r for r in ArchiveIterator(io.BytesIO(data)) if r.rec_type == "revisit")
    assert record.rec_type == "revisit"
    assert record.rec_headers.get_header("WARC-Payload-Digest") == digest
    assert payload_digest(body) == digest  # the writer's deduplication key is the same value
