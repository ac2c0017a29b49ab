"""Bytes to text in the browser's order: BOM, header, the page's declaration, UTF-8, windows-1252."""

from __future__ import annotations

import pytest

from jobs.reader.charset import codec_for, decode

RUSSIAN = "Привет, мир: ёжик в тумане"
JAPANESE = "日本語のテキスト、カタカナとひらがな"


def _page(meta: str, text: str, encoding: str) -> bytes:
    return f"<html><head>{meta}<title>t</title></head><body><p>{text}</p></body></html>".encode(encoding)


def test_a_page_declaring_windows_1251_only_in_a_meta_tag_comes_out_readable() -> None:
    body = _page('<meta charset="windows-1251">', RUSSIAN, "cp1251")
    decoded = decode(body, None, "html")
    assert RUSSIAN in decoded.text
    assert decoded.source == "meta"


def test_a_page_declaring_shift_jis_in_http_equiv_comes_out_readable() -> None:
    meta = '<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">'
    decoded = decode(_page(meta, JAPANESE, "shift_jis"), None, "html")
    assert JAPANESE in decoded.text


@pytest.mark.parametrize(("bom", "codec"), [(b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")])
def test_utf16_with_a_bom_decodes_whatever_the_header_says(bom: bytes, codec: str) -> None:
    body = bom + _page("", RUSSIAN, codec)
    decoded = decode(body, "iso-8859-1", "html")
    assert RUSSIAN in decoded.text
    assert decoded.source == "bom"
    assert not decoded.text.startswith("\ufeff")


def test_the_header_charset_wins_over_a_conflicting_meta_as_in_browsers() -> None:
    body = _page('<meta charset="utf-8">', RUSSIAN, "cp1251")
    decoded = decode(body, "windows-1251", "html")
    assert RUSSIAN in decoded.text
    assert decoded.source == "header"


def test_a_header_charset_that_is_wrong_for_the_bytes_still_wins() -> None:
    # The server says windows-1252 for a UTF-8 page: the reader of the page sees what a browser
    # shows, and the test pins that the order, not a guess, decides.
    decoded = decode("café".encode(), "windows-1252", "other")
    assert decoded.text == "cafÃ©"


def test_an_unknown_header_label_is_ignored_and_the_page_decides() -> None:
    body = _page('<meta charset="windows-1251">', RUSSIAN, "cp1251")
    decoded = decode(body, "no-such-charset", "html")
    assert RUSSIAN in decoded.text
    assert decoded.source == "meta"


def test_undeclared_utf8_is_read_as_utf8() -> None:
    decoded = decode(_page("", RUSSIAN, "utf-8"), None, "html")
    assert RUSSIAN in decoded.text
    assert decoded.source == "utf-8"


def test_undeclared_legacy_bytes_fall_back_to_windows_1252() -> None:
    decoded = decode("Grüße aus Köln".encode("cp1252"), None, "other")
    assert decoded.text == "Grüße aus Köln"
    assert decoded.source == "default"


def test_a_utf8_body_cut_inside_a_character_is_still_utf8() -> None:
    body = ("ж" * 100).encode()[:-1]
    decoded = decode(body, None, "other")
    assert decoded.text == "ж" * 99


def test_a_few_broken_bytes_do_not_turn_a_utf8_page_into_mojibake() -> None:
    body = (RUSSIAN * 20).encode() + b"\xff" + (RUSSIAN * 20).encode()
    decoded = decode(body, None, "other")
    assert decoded.source == "utf-8"
    assert RUSSIAN in decoded.text


def test_a_meta_charset_after_the_first_1024_bytes_is_honoured_when_the_bytes_are_not_utf8() -> None:
    padding = "<script>" + "x" * 2000 + "</script>"
    body = f'<html><head>{padding}<meta charset="windows-1251"></head><body>{RUSSIAN}</body>'.encode("cp1251")
    decoded = decode(body, None, "html")
    assert RUSSIAN in decoded.text
    assert decoded.source == "late-meta"


def test_an_xml_declaration_names_the_encoding_of_a_feed() -> None:
    body = f'<?xml version="1.0" encoding="windows-1251"?><rss><title>{RUSSIAN}</title></rss>'.encode(
        "cp1251"
    )
    assert RUSSIAN in decode(body, None, "xml").text


def test_labels_map_as_the_encoding_standard_says() -> None:
    assert codec_for("latin1") == "cp1252"
    assert codec_for("Shift_JIS") == "cp932"
    assert codec_for("gb2312") == "gb18030"
    assert codec_for("utf8") == "utf-8"
    assert codec_for("iso-2022-kr") is None
    assert codec_for("bogus") is None
