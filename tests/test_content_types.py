"""What a response declares, and what an undeclared body is (WHATWG MIME sniffing)."""

from __future__ import annotations

import pytest

from jobs.reader.content_types import (
    DeclaredKind,
    apache_bug_binary,
    declared_kind,
    is_text_essence,
    parse_content_type,
    sniff,
)


@pytest.mark.parametrize(
    "header",
    [
        "text/html",
        "text/html; charset=utf-8",
        "TEXT/HTML",
        "text/plain",
        "text/csv",
        "application/json",
        "application/xml",
        "application/xhtml+xml",
        "application/rss+xml",
        "application/atom+xml",
        "application/ld+json",
        "application/vnd.api+json",
        "image/svg+xml",
    ],
)
def test_text_types_and_any_json_or_xml_suffix_are_text(header: str) -> None:
    assert declared_kind(header) is DeclaredKind.TEXT


@pytest.mark.parametrize(
    "header",
    [
        "image/bmp",
        "application/octet-stream",
        "application/zip",
        "video/mp4",
        "font/woff2",
    ],
)
def test_other_declared_types_are_binary_and_refused_before_reading(header: str) -> None:
    assert declared_kind(header) is DeclaredKind.BINARY


@pytest.mark.parametrize("header", ["application/pdf", "application/x-pdf", "Application/PDF; qs=0.9"])
def test_a_declared_pdf_is_its_own_kind_read_up_to_the_pdf_cap(header: str) -> None:
    assert declared_kind(header) is DeclaredKind.PDF


@pytest.mark.parametrize("header", [None, "", "   ", "html", "text/", "/html", "text html", "text/ht ml"])
def test_a_missing_empty_or_unparsable_header_is_undeclared(header: str | None) -> None:
    assert declared_kind(header) is DeclaredKind.UNDECLARED


@pytest.mark.parametrize("header", ["unknown/unknown", "application/unknown", "*/*"])
def test_the_whatwg_unknown_types_are_undeclared_so_the_body_is_sniffed(header: str) -> None:
    assert declared_kind(header) is DeclaredKind.UNDECLARED


def test_the_charset_parameter_is_read_quoted_or_not() -> None:
    assert parse_content_type("text/html; charset=windows-1251") == parse_content_type(
        'text/html;charset="windows-1251"'
    )
    parsed = parse_content_type('Text/HTML ; Charset="Shift_JIS"')
    assert parsed is not None
    assert (parsed.essence, parsed.charset) == ("text/html", "Shift_JIS")


def test_a_repeated_header_keeps_the_last_valid_type() -> None:
    parsed = parse_content_type("text/html; charset=utf-8, text/html")
    assert parsed is not None
    assert (parsed.essence, parsed.charset) == ("text/html", "utf-8")


@pytest.mark.parametrize(
    ("body", "mime"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "image/png"),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj", "application/pdf"),
        (b"PK\x03\x04\x14\x00\x00\x00\x08\x00", "application/zip"),
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00", "application/x-gzip"),
        (b"GIF89a\x01\x00\x01\x00", "image/gif"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "image/jpeg"),
        (b"RIFF\x24\x00\x00\x00WEBPVP8 ", "image/webp"),
    ],
)
def test_binary_signatures_sniff_as_binary(body: bytes, mime: str) -> None:
    assert sniff(body) == mime
    assert not is_text_essence(sniff(body))


def test_bytes_that_never_occur_in_text_sniff_as_binary() -> None:
    assert sniff(b"plain start\x00\x01\x02 then garbage") == "application/octet-stream"


@pytest.mark.parametrize(
    "body",
    [b"<!DOCTYPE html><html>", b"\n\n  <html lang=en>", b"<p>hello", b"<!-- a comment --><div>", b"<TITLE>x"],
)
def test_html_sniffs_by_its_leading_tag_even_after_whitespace(body: bytes) -> None:
    assert sniff(body) == "text/html"


def test_a_tag_must_end_where_the_name_ends() -> None:
    assert sniff(b"<Bob> said hello") == "text/plain"


def test_undeclared_plain_text_sniffs_as_text() -> None:
    assert sniff("Just words, with ümlauts and a newline\n".encode()) == "text/plain"
    assert sniff(b'{"json": true}') == "text/plain"
    assert sniff(b"\xff\xfeh\x00i\x00") == "text/plain"


def test_an_apache_default_text_plain_label_over_binary_bytes_is_binary() -> None:
    assert apache_bug_binary("text/plain; charset=ISO-8859-1", b"%PDF-1.4\n\x00\x01\x02binary")
    assert not apache_bug_binary("text/plain; charset=ISO-8859-1", b"honest text")
    assert not apache_bug_binary("text/plain; charset=windows-1251", b"\x00\x01\x02")
