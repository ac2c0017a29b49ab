"""Bytes to text in the browser's order: BOM, header, the page's declaration, UTF-8, detection, 1252."""

from __future__ import annotations

import codecs

import pytest
import webencodings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


def test_undeclared_western_european_bytes_read_as_windows_1252() -> None:
    decoded = decode("Grüße aus Köln".encode("cp1252"), None, "other")
    assert decoded.text == "Grüße aus Köln"
    assert decoded.encoding == "cp1252"


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


# Undeclared legacy pages: each script reads in its own letters, found by statistical detection.

SCRIPTS = {
    "Japanese": (
        "東京は日本の首都であり、世界で最も人口の多い都市圏の一つです。多くの人々が毎日電車で通勤しています。"
        "春には桜が咲き、公園は花見をする人でいっぱいになります。",
        ["shift_jis", "euc_jp", "iso2022_jp"],
    ),
    "Cyrillic": (
        "Москва является столицей России и крупнейшим городом страны. Летом жители часто отдыхают в парках, "
        "а зимой катаются на коньках по замёрзшим прудам.",
        ["cp1251", "koi8_r", "cp866", "iso8859_5"],
    ),
    "Chinese": (
        "北京是中华人民共和国的首都，也是全国的政治和文化中心。每年有很多游客来这里参观故宫和长城，品尝地道的北京烤鸭。",
        ["gbk", "gb18030"],
    ),
    "traditional Chinese": (
        "臺北是臺灣最大的城市，也是政治與經濟的中心。許多遊客喜歡在夜市品嚐各種美食，並參觀故宮博物院。",
        ["big5"],
    ),
    "Greek": (
        "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας και μία από τις αρχαιότερες πόλεις του κόσμου. "
        "Οι επισκέπτες θαυμάζουν την Ακρόπολη και τα μουσεία της.",
        ["cp1253", "iso8859_7"],
    ),
    "Arabic": (
        "القاهرة هي عاصمة مصر وأكبر مدنها. يزور السياح الأهرامات والمتاحف كل عام، "
        "ويستمتعون بالمشي على ضفاف نهر النيل في المساء.",
        ["cp1256", "iso8859_6"],
    ),
    "Hebrew": (
        "ירושלים היא עיר עתיקה וחשובה מאוד. תיירים רבים מבקרים בה בכל שנה "
        "ונהנים מהשווקים, מהמוזיאונים ומהאוכל הטעים.",
        ["cp1255", "iso8859_8"],
    ),
    "Thai": (
        "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย มีวัดและตลาดมากมายที่นักท่องเที่ยวชอบไปเยี่ยมชม อาหารไทยมีรสชาติเผ็ดและหวาน",
        ["cp874"],
    ),
    "Korean": (
        "서울은 대한민국의 수도이며 가장 큰 도시입니다. 많은 사람들이 지하철을 이용하여 출근하고, "
        "주말에는 한강 공원에서 산책을 즐깁니다.",
        ["euc_kr", "cp949"],
    ),
}
WESTERN = {
    "French": "Il était une fois, sur une île lointaine, un garçon qui rêvait de la mer. "
    "Où est la bibliothèque ? Ça dépend de l'été, à côté du château où l'on mange des crêpes.",
    "German": "Die Straße führt über die Brücke zum schönen Schloß. Im Frühling blühen überall "
    "Blumen, und die Kinder spielen fröhlich im Garten hinter dem Haus.",
    "Spanish": "El niño comió una manzana en la montaña. ¿Qué pasó después? La señora López "
    "llegó tarde a la reunión del ayuntamiento en España.",
    "Portuguese": "A nação brasileira é conhecida pela sua diversidade cultural. Não há dúvida "
    "de que a música e a culinária são importantes para o povo.",
    "Italian": "La città è piena di gente perché è festa. Però non c'è più posto nel caffè, "
    "quindi andiamo al ristorante là in fondo alla via.",
}


def _undeclared_page(text: str, codec: str) -> bytes:
    return f"<html><head><title>t</title></head><body><div class=a><p>{text}</p></div></body></html>".encode(
        codec
    )


@pytest.mark.parametrize(
    ("text", "codec"),
    [
        pytest.param(text, codec, id=f"{script}-{codec}")
        for script, (text, codecs) in SCRIPTS.items()
        for codec in codecs
    ],
)
def test_an_undeclared_legacy_page_reads_in_its_own_letters(text: str, codec: str) -> None:
    decoded = decode(_undeclared_page(text, codec), None, "html")
    assert text in decoded.text
    assert decoded.source == "detected"


@pytest.mark.parametrize("text", [pytest.param(text, id=language) for language, text in WESTERN.items()])
def test_undeclared_western_european_text_keeps_its_accents_rather_than_a_baltic_code_page(text: str) -> None:
    for body in (_undeclared_page(text, "cp1252"), text.encode("cp1252")):
        decoded = decode(body, None, "html")
        assert text in decoded.text
        assert decoded.encoding == "cp1252"


def test_a_declared_charset_wins_over_what_detection_would_guess() -> None:
    body = _undeclared_page(RUSSIAN * 5, "cp1251")
    decoded = decode(body, "koi8-r", "html")
    assert (decoded.source, decoded.encoding) == ("header", "koi8-r")
    assert RUSSIAN not in decoded.text


def test_plain_ascii_with_no_declaration_is_not_sent_to_detection() -> None:
    decoded = decode(b"<p>" + b"plain words " * 1000 + b"</p>", None, "html")
    assert decoded.source == "utf-8"


# Every WHATWG label, in every place a label can be written, decodes without raising.

LABELS = sorted(webencodings.LABELS)
ALL_BYTES = bytes(range(256)) * 4


def _usable(label: str) -> bool:
    return codec_for(label) is not None


@pytest.mark.parametrize("label", LABELS)
def test_every_whatwg_label_maps_to_a_codec_python_has_or_to_nothing(label: str) -> None:
    codec = codec_for(label)
    if webencodings.lookup(label).name == "replacement":
        assert codec is None
    else:
        assert codec is not None
        codecs.lookup(codec)
        ALL_BYTES.decode(codec, errors="replace")


@pytest.mark.parametrize("label", LABELS)
def test_a_header_label_decides_or_is_ignored(label: str) -> None:
    decoded = decode(b"<p>" + ALL_BYTES + b"</p>", label, "html")
    if _usable(label):
        assert (decoded.source, decoded.encoding) == ("header", codec_for(label))
    else:
        assert decoded.source != "header"


@pytest.mark.parametrize("label", LABELS)
def test_a_meta_label_decides_or_is_ignored(label: str) -> None:
    body = f'<meta charset="{label}"><p>'.encode() + ALL_BYTES
    decoded = decode(body, None, "html")
    assert (decoded.source == "meta") == _usable(label)


@pytest.mark.parametrize("label", LABELS)
def test_an_xml_declaration_label_decides_or_is_ignored(label: str) -> None:
    body = f'<?xml version="1.0" encoding="{label}"?><feed>'.encode() + ALL_BYTES
    decoded = decode(body, None, "xml")
    assert decoded.source in ("xml", "meta", "utf-8", "detected", "default")
    if _usable(label) and not codec_for(label).startswith("utf-16"):  # type: ignore[union-attr]
        assert (decoded.source, decoded.encoding) == ("xml", codec_for(label))


@pytest.mark.parametrize("label", LABELS)
def test_a_late_meta_label_decides_or_is_ignored(label: str) -> None:
    body = b"<script>" + b"x" * 2000 + b"</script>" + f'<meta charset="{label}">'.encode() + b"\xe9\xe8" * 50
    decoded = decode(body, None, "html")
    codec = codec_for(label)
    if codec is not None and codec != "utf-8" and not codec.startswith("utf-16"):
        assert (decoded.source, decoded.encoding) == ("late-meta", codec)
    else:
        assert decoded.source in ("detected", "default")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=60), st.text(max_size=30))
def test_garbage_labels_in_any_place_never_raise(label: bytes, header: str) -> None:
    for body, flavor in (
        (b'<meta charset="' + label + b'"><p>\xe9', "html"),
        (b'<meta http-equiv="Content-Type" content="text/html; charset=' + label + b'">\xe9', "html"),
        (b'<?xml version="1.0" encoding="' + label + b'"?><a>\xe9', "xml"),
        (b"<p>" + b"y" * 1100 + b"<meta charset=" + label + b">\xe9\xe8", "html"),
    ):
        decode(body, None, flavor)
        decode(body, header, flavor)
        decode(body, header.encode("utf-8", "surrogateescape").decode("latin-1"), flavor)


def test_a_header_label_with_a_byte_that_is_not_utf8_is_ignored() -> None:
    # aiohttp hands over such a header with the byte as a lone surrogate.
    decoded = decode("café".encode(), b"utf-8\xff".decode("utf-8", "surrogateescape"), "other")
    assert (decoded.text, decoded.source) == ("café", "utf-8")


def test_x_user_defined_reads_as_windows_1252_wherever_it_is_declared() -> None:
    text = "Grüße aus Köln"
    for body, header, flavor in (
        (text.encode("cp1252"), "x-user-defined", "other"),
        (b'<?xml version="1.0" encoding="x-user-defined"?>' + text.encode("cp1252"), None, "xml"),
        (b'<meta charset="x-user-defined">' + text.encode("cp1252"), None, "html"),
        (b"<p>" + b"y" * 1100 + b'<meta charset="x-user-defined">' + text.encode("cp1252"), None, "html"),
    ):
        decoded = decode(body, header, flavor)  # type: ignore[arg-type]
        assert text in decoded.text
        assert decoded.encoding == "cp1252"
